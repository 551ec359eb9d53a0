//! `on_limit`: "error" returns the denial; "wait" sleeps until `retry_after`
//! and tries again (bounded by `max_wait`). These cases use real time: the
//! store's clock (Redis `TIME`) decides, tokio sleeps.

use super::{denied, on_global_store};
use redlimit::{rate_limit, RateLimited};
use std::time::{Duration, Instant};

#[rate_limit(algo = "gcra", rate = "1/1h", burst = 0, on_limit = "error")]
async fn strict() -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn error_returns_the_denial() {
    on_global_store(async {
        strict().await.unwrap();
        let started = Instant::now();
        let d = denied(strict().await);
        assert!(started.elapsed() < Duration::from_millis(500), "no waiting");
        let retry = d.retry_after().unwrap();
        assert!(retry > Duration::from_secs(3590) && retry <= Duration::from_secs(3600), "{retry:?}");
    });
}

#[rate_limit(algo = "gcra", rate = "1/300ms", burst = 0, on_limit = "wait")]
async fn paced() -> Result<Instant, RateLimited> {
    Ok(Instant::now())
}

#[test]
fn wait_sleeps_retry_after_then_passes() {
    on_global_store(async {
        let started = Instant::now();
        paced().await.unwrap();
        let second = paced().await.expect("waited, then passed");
        let waited = second - started;
        assert!(waited >= Duration::from_millis(250), "passed after {waited:?}: too early for 1 per 300ms");
        assert!(waited < Duration::from_secs(2), "passed after {waited:?}: waited far longer than retry_after");
    });
}

// No denial can reach the caller, so the function need not return a Result.
#[rate_limit(algo = "gcra", rate = "1/200ms", burst = 0, on_limit = "wait")]
async fn paced_plain(x: u32) -> u32 {
    x
}

#[test]
fn wait_with_any_return_type() {
    on_global_store(async {
        let started = Instant::now();
        assert_eq!(paced_plain(1).await + paced_plain(2).await, 3);
        assert!(started.elapsed() >= Duration::from_millis(150), "{:?}", started.elapsed());
    });
}

#[rate_limit(algo = "gcra", rate = "1/10s", burst = 0, on_limit = "wait", max_wait = "100ms")]
async fn impatient() -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn max_wait_returns_the_denial_without_sleeping() {
    on_global_store(async {
        impatient().await.unwrap();
        let started = Instant::now();
        let d = denied(impatient().await);
        assert!(started.elapsed() < Duration::from_millis(500), "retry_after > max_wait: no point sleeping");
        assert!(d.retry_after().unwrap() > Duration::from_secs(9));
    });
}

#[rate_limit(algo = "gcra", rate = "1/200ms", burst = 0, on_limit = "wait", max_wait = "2s")]
async fn patient() -> Result<Instant, RateLimited> {
    Ok(Instant::now())
}

#[test]
fn max_wait_long_enough_passes() {
    on_global_store(async {
        let started = Instant::now();
        patient().await.unwrap();
        let passed = patient().await.unwrap();
        assert!(passed - started >= Duration::from_millis(150), "{:?}", passed - started);
    });
}

#[rate_limit(algo = "leaky_bucket", capacity = 1, rate = "1/100ms", on_limit = "wait")]
async fn shaped() -> Instant {
    Instant::now()
}

#[test]
fn a_leaky_bucket_spaces_a_burst() {
    on_global_store(async {
        let before = Instant::now();
        let burst: Vec<_> = (0..5).map(|_| tokio::spawn(shaped())).collect();
        let mut starts = Vec::new();
        for call in burst {
            starts.push(call.await.unwrap());
        }
        starts.sort();
        // The store admits one per 100 ms, the first no earlier than `before`,
        // and a body runs after its admission however late it is scheduled:
        // so the k-th body starts at least k × 100 ms after `before`. (Gaps
        // between bodies are not bounded below: a late first body shortens
        // the gap to the next.) 80 ms per step leaves room for rounding.
        for (k, start) in starts.iter().enumerate() {
            let since = *start - before;
            assert!(since >= Duration::from_millis(80) * k as u32, "body {k} after {since:?}: {starts:?}");
        }
        assert!(starts[4] - starts[0] < Duration::from_secs(3), "{:?}", starts[4] - starts[0]);
    });
}
