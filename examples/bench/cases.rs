//! The policies measured, each three ways: its raw script through redis-rs,
//! `Limiter::check`, and a `#[rate_limit]` function.
//!
//! Limits are generous (1000 per second per user, spread over 10 000 users),
//! so nearly every call is admitted and writes: the expensive path.

use redlimit::{rate_limit, AlgorithmKind, Policy, Rate, RateLimited};

/// One algorithm's case.
pub struct Algo {
    pub kind: AlgorithmKind,
    pub policy: Policy,
    /// The policy's parameters, as the naive forms take them as ARGV (the
    /// runtime writes them into the policy's own script instead).
    pub params: Vec<u64>,
    /// `(limit, window in ms)` when, on the server's clock, the runtime
    /// decides `policy` with its own `lua/fixed_window_counter.lua` instead
    /// (no ARGV for a cost of 1; one integer back).
    pub counter: Option<(u64, u64)>,
}

impl Algo {
    /// A storage key like the runtime's for `name` and `user_key`
    /// (`redlimit:<layout>:<name length>:<name>:<key>`), for the raw script cases.
    pub fn storage_key(&self, name: &str, user_key: &str) -> String {
        let prefix = redlimit::__private::key_prefix("redlimit", &self.policy, name);
        format!("{}:{user_key}", String::from_utf8(prefix).expect("a UTF-8 prefix"))
    }
}

fn reduced(count: u64, period_us: u64) -> (u64, u64) {
    Rate { count, period_us }.reduced()
}

/// Every algorithm, in [`AlgorithmKind::ALL`] order.
pub fn algorithms() -> Vec<Algo> {
    let (n, p) = reduced(1000, 1_000_000);
    vec![
        Algo {
            kind: AlgorithmKind::FixedWindow,
            policy: Policy::fixed_window("1000/1s").unwrap(),
            params: vec![1, 1000, 1_000_000],
            counter: Some((1000, 1000)),
        },
        Algo {
            kind: AlgorithmKind::SlidingWindow,
            policy: Policy::sliding_window("1000/1s", "100ms").unwrap(),
            params: vec![100_000, 1, 1000, 1_000_000],
            counter: None,
        },
        Algo {
            kind: AlgorithmKind::SlidingLog,
            policy: Policy::sliding_log("1000/1s").unwrap(),
            params: vec![1, 1000, 1_000_000],
            counter: None,
        },
        Algo {
            kind: AlgorithmKind::TokenBucket,
            policy: Policy::token_bucket(1000, "1000/1s").unwrap(),
            params: vec![1000, n, p],
            counter: None,
        },
        Algo {
            kind: AlgorithmKind::LeakyBucket,
            policy: Policy::leaky_bucket(1000, "1000/1s").unwrap(),
            params: vec![1000, n, p],
            counter: None,
        },
        Algo {
            kind: AlgorithmKind::Gcra,
            policy: Policy::gcra("1000/1s", 999).unwrap(),
            params: vec![999, n, p],
            counter: None,
        },
    ]
}

/// A three-strategy policy, to show it still takes one round trip.
pub fn three_strategies() -> Policy {
    Policy::fixed_window("100000/1s,1000000/1m,10000000/1h").unwrap()
}

#[rate_limit(algo = "fixed_window", strategies = "1000/1s", key = "user:<user>", name = "bench.macro.fixed_window")]
async fn fixed_window(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(
    algo = "sliding_window",
    strategies = "1000/1s",
    precision = "100ms",
    key = "user:<user>",
    name = "bench.macro.sliding_window"
)]
async fn sliding_window(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "sliding_log", strategies = "1000/1s", key = "user:<user>", name = "bench.macro.sliding_log")]
async fn sliding_log(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(
    algo = "token_bucket",
    capacity = 1000,
    rate = "1000/1s",
    key = "user:<user>",
    name = "bench.macro.token_bucket"
)]
async fn token_bucket(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(
    algo = "leaky_bucket",
    capacity = 1000,
    rate = "1000/1s",
    key = "user:<user>",
    name = "bench.macro.leaky_bucket"
)]
async fn leaky_bucket(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "gcra", rate = "1000/1s", burst = 999, key = "user:<user>", name = "bench.macro.gcra")]
async fn gcra(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

/// Calls the `#[rate_limit]` function of `kind` for `user`; true if it passed.
pub async fn call_macro(kind: AlgorithmKind, user: u64) -> bool {
    match kind {
        AlgorithmKind::FixedWindow => fixed_window(user).await.is_ok(),
        AlgorithmKind::SlidingWindow => sliding_window(user).await.is_ok(),
        AlgorithmKind::SlidingLog => sliding_log(user).await.is_ok(),
        AlgorithmKind::TokenBucket => token_bucket(user).await.is_ok(),
        AlgorithmKind::LeakyBucket => leaky_bucket(user).await.is_ok(),
        AlgorithmKind::Gcra => gcra(user).await.is_ok(),
        AlgorithmKind::Concurrency => concurrency(user).await.is_ok(),
    }
}

#[rate_limit(algo = "concurrency", limit = 1000, key = "user:<user>", name = "bench.macro.concurrency")]
async fn concurrency(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

/// The memory section's gcra (`local.rs`) through the attribute: governor's
/// rate and burst, on the global store, which the memory section makes
/// `Store::memory()` (it runs in a process of its own).
#[rate_limit(algo = "gcra", rate = "1000000/1s", burst = 999_999, key = "user:<user>", name = "bench.memory.macro")]
pub async fn memory_gcra(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

/// A function whose every call after the first is denied for an hour: the
/// flood case of the deny cache, through the attribute.
#[rate_limit(algo = "gcra", rate = "1/1h", burst = 0, name = "bench.macro.flood")]
pub async fn flooded() -> Result<(), RateLimited> {
    Ok(())
}
