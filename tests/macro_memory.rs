//! `#[rate_limit]` on the in-memory store: every option (`tests/macro_cases/`).
//!
//! `cargo test --test macro_memory`

#[path = "cases/macro_options/mod.rs"]
mod cases;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_option_on_the_memory_store() {
    ratelimit::init(ratelimit::Store::memory()).unwrap();
    cases::run_all().await;
}
