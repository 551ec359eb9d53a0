//! `#[rate_limit]` behaviour, one module per option, run on every backend.
//!
//! The annotated functions use the process-wide store, so each backend is its
//! own test binary (`macro_memory.rs`, `macro_redis.rs`) that sets the store
//! and then runs [`run_all`]. Cases run concurrently (the waiting ones overlap)
//! and each uses its own functions, hence its own limiter names and keys.

pub mod algo;
pub mod cost;
pub mod crate_path;
pub mod fallback;
pub mod key;
pub mod name;
pub mod on_limit;
pub mod stacked;

use std::future::Future;
use std::pin::Pin;

pub type Case = (&'static str, fn() -> Pin<Box<dyn Future<Output = ()> + Send>>);

/// Wraps an `async fn()` as a [`Case`].
macro_rules! case {
    ($path:path) => {
        (stringify!($path), || Box::pin($path()) as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>)
    };
}
pub(crate) use case;

/// Runs every case concurrently; panics once, naming every case that failed.
pub async fn run_all() {
    let cases: Vec<Case> = [
        algo::CASES,
        cost::CASES,
        crate_path::CASES,
        fallback::CASES,
        key::CASES,
        name::CASES,
        on_limit::CASES,
        stacked::CASES,
    ]
    .concat();
    let started = std::time::Instant::now();
    let handles: Vec<_> = cases.iter().map(|(name, case)| (*name, tokio::spawn(case()))).collect();
    let mut failed = Vec::new();
    for (name, handle) in handles {
        if let Err(error) = handle.await {
            failed.push(format!("{name}: {error}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases failed (see the panics above):\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    eprintln!("{} cases passed in {:?}", cases.len(), started.elapsed());
}

/// The denial of a call that must have been denied.
#[track_caller]
pub fn denied<T: std::fmt::Debug>(result: Result<T, ratelimit::RateLimited>) -> ratelimit::RateLimited {
    match result {
        Ok(value) => panic!("expected a denial, got Ok({value:?})"),
        Err(denied) => denied,
    }
}
