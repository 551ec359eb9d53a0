//! `#[rate_limit(policy = "...")]` on the in-memory store (`tests/cases/config_macro.rs`).
//!
//! `cargo test --test config_macro_memory`

#[path = "cases/config_macro.rs"]
mod cases;

#[tokio::test(flavor = "current_thread")]
async fn named_policies_on_the_memory_store() {
    let clock = redlimit::ManualClock::new();
    redlimit::init(redlimit::Store::memory().with_clock(clock)).unwrap();
    cases::run("memory").await;
}
