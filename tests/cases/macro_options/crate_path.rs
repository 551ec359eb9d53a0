//! `crate = "..."`: the generated code reaches the runtime through another path.

use super::{case, denied, Case};

pub const CASES: &[Case] = &[case!(a_reexported_runtime_works)];

mod facade {
    pub use ratelimit as limits;
}

#[ratelimit::rate_limit(crate = "self::facade::limits", algo = "gcra", rate = "1/1h", name = "crate_path")]
async fn via_facade() -> Result<(), facade::limits::RateLimited> {
    Ok(())
}

async fn a_reexported_runtime_works() {
    via_facade().await.unwrap();
    assert_eq!(&*denied(via_facade().await).limiter, "crate_path");
}
