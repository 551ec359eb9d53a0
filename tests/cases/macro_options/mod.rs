//! `#[rate_limit]` behaviour, one module per option, one `#[test]` per case,
//! run on every backend.
//!
//! The annotated functions use the process-wide store, so each backend is its
//! own test binary (`macro_memory.rs`, `macro_redis.rs`) that includes these
//! modules and defines `on_global_store`: it sets that binary's global store
//! once, then runs a case's body on the binary's one runtime
//! (`redlimit_test_support::runtime`), which outlives every test and so
//! keeps the global store's Redis connection alive. Each case uses its own
//! functions, hence its own limiter names and keys, so cases run in parallel.

pub mod algo;
pub mod cost;
pub mod crate_path;
pub mod fallback;
pub mod key;
pub mod name;
pub mod on_limit;
pub mod priority;
pub mod refund_on;
pub mod stacked;

use crate::on_global_store;

/// The denial of a call that must have been denied.
#[track_caller]
pub fn denied<T: std::fmt::Debug>(result: Result<T, redlimit::RateLimited>) -> redlimit::RateLimited {
    match result {
        Ok(value) => panic!("expected a denial, got Ok({value:?})"),
        Err(denied) => denied,
    }
}
