//! `crate = "..."`: generated code reaches the runtime through a re-export.
mod facade {
    pub use ::redlimit as limits;
}

extern crate redlimit as renamed;

#[redlimit::rate_limit(crate = "crate::facade::limits", algo = "gcra", rate = "1/1m")]
async fn via_facade() -> Result<(), redlimit::RateLimited> {
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
