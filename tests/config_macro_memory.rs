//! `#[rate_limit(policy = "...")]` on the in-memory store (`tests/config_cases/`).
//!
//! `cargo test --test config_macro_memory`

#[path = "config_cases/mod.rs"]
mod cases;

#[tokio::test(flavor = "current_thread")]
async fn named_policies_on_the_memory_store() {
    let clock = ratelimit::ManualClock::new();
    ratelimit::init(ratelimit::Store::memory().with_clock(clock)).unwrap();
    cases::run("memory").await;
}
