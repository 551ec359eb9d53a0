//! `crate = "..."`: the generated code reaches the runtime through another path.

use super::{denied, on_global_store};

mod facade {
    pub use redlimit as limits;
}

#[redlimit::rate_limit(crate = "self::facade::limits", algo = "gcra", rate = "1/1h", name = "crate_path")]
async fn via_facade() -> Result<(), facade::limits::RateLimited> {
    Ok(())
}

#[test]
fn a_reexported_runtime_works() {
    on_global_store(async {
        via_facade().await.unwrap();
        assert_eq!(denied(via_facade().await).limiter(), "crate_path");
    });
}
