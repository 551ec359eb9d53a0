//! `#[rate_limit]` on the in-memory store: every option
//! (`tests/cases/macro_options/`), one test per case.
//!
//! `cargo test --test macro_memory` (one case: `cargo test --test macro_memory a_literal_cost`)

#[path = "cases/macro_options/mod.rs"]
mod cases;

use redlimit_test_support::runtime;
use std::future::Future;
use std::sync::Once;

/// Runs one case on this binary's runtime, the global store being
/// `Store::memory()` (set by whichever case comes first).
fn on_global_store<F: Future>(case: F) -> F::Output {
    static STORE: Once = Once::new();
    STORE.call_once(|| redlimit::init(redlimit::Store::memory()).unwrap());
    runtime::block_on(case)
}
