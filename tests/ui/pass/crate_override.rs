//! `crate = "..."`: generated code reaches the runtime through a re-export.
mod facade {
    pub use ::ratelimit as limits;
}

extern crate ratelimit as renamed;

#[ratelimit::rate_limit(crate = "crate::facade::limits", algo = "gcra", rate = "1/1m")]
async fn via_facade() -> Result<(), ratelimit::RateLimited> {
    Ok(())
}

#[renamed::rate_limit(crate = "::renamed", algo = "gcra", rate = "1/1m")]
async fn via_rename() -> Result<(), renamed::RateLimited> {
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert!(via_facade().await.is_ok());
    assert!(via_facade().await.is_err());
    assert!(via_rename().await.is_ok());
}
