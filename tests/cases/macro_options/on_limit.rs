//! `on_limit`: "error" returns the denial; "wait" sleeps until `retry_after`
//! and tries again (bounded by `max_wait`). These cases use real time: the
//! store's clock (Redis `TIME`) decides, tokio sleeps.

use super::{case, denied, Case};
use ratelimit::{rate_limit, RateLimited};
use std::time::{Duration, Instant};

pub const CASES: &[Case] = &[
    case!(error_returns_the_denial),
    case!(wait_sleeps_retry_after_then_passes),
    case!(wait_with_any_return_type),
    case!(max_wait_returns_the_denial_without_sleeping),
    case!(max_wait_long_enough_passes),
    case!(a_leaky_bucket_spaces_a_burst),
];

#[rate_limit(algo = "gcra", rate = "1/1h", burst = 0, on_limit = "error")]
async fn strict() -> Result<(), RateLimited> {
    Ok(())
}

async fn error_returns_the_denial() {
    strict().await.unwrap();
    let started = Instant::now();
    let d = denied(strict().await);
    assert!(started.elapsed() < Duration::from_millis(500), "no waiting");
    let retry = d.retry_after().unwrap();
    assert!(retry > Duration::from_secs(3590) && retry <= Duration::from_secs(3600), "{retry:?}");
}

#[rate_limit(algo = "gcra", rate = "1/300ms", burst = 0, on_limit = "wait")]
async fn paced() -> Result<Instant, RateLimited> {
    Ok(Instant::now())
}

async fn wait_sleeps_retry_after_then_passes() {
    let started = Instant::now();
    paced().await.unwrap();
    let second = paced().await.expect("waited, then passed");
    let waited = second - started;
    assert!(waited >= Duration::from_millis(250), "passed after {waited:?}: too early for 1 per 300ms");
    assert!(waited < Duration::from_secs(2), "passed after {waited:?}: waited far longer than retry_after");
}

// No denial can reach the caller, so the function need not return a Result.
#[rate_limit(algo = "gcra", rate = "1/200ms", burst = 0, on_limit = "wait")]
async fn paced_plain(x: u32) -> u32 {
    x
}

async fn wait_with_any_return_type() {
    let started = Instant::now();
    assert_eq!(paced_plain(1).await + paced_plain(2).await, 3);
    assert!(started.elapsed() >= Duration::from_millis(150), "{:?}", started.elapsed());
}

#[rate_limit(algo = "gcra", rate = "1/10s", burst = 0, on_limit = "wait", max_wait = "100ms")]
async fn impatient() -> Result<(), RateLimited> {
    Ok(())
}

async fn max_wait_returns_the_denial_without_sleeping() {
    impatient().await.unwrap();
    let started = Instant::now();
    let d = denied(impatient().await);
    assert!(started.elapsed() < Duration::from_millis(500), "retry_after > max_wait: no point sleeping");
    assert!(d.retry_after().unwrap() > Duration::from_secs(9));
}

#[rate_limit(algo = "gcra", rate = "1/200ms", burst = 0, on_limit = "wait", max_wait = "2s")]
async fn patient() -> Result<Instant, RateLimited> {
    Ok(Instant::now())
}

async fn max_wait_long_enough_passes() {
    let started = Instant::now();
    patient().await.unwrap();
    let passed = patient().await.unwrap();
    assert!(passed - started >= Duration::from_millis(150), "{:?}", passed - started);
}

#[rate_limit(algo = "leaky_bucket", capacity = 1, rate = "1/100ms", on_limit = "wait")]
async fn shaped() -> Instant {
    Instant::now()
}

async fn a_leaky_bucket_spaces_a_burst() {
    let burst: Vec<_> = (0..5).map(|_| tokio::spawn(shaped())).collect();
    let mut starts = Vec::new();
    for call in burst {
        starts.push(call.await.unwrap());
    }
    starts.sort();
    for pair in starts.windows(2) {
        let gap = pair[1] - pair[0];
        // The store admits one per 100 ms exactly; allow for scheduling jitter.
        assert!(gap >= Duration::from_millis(80), "gap {gap:?} in {starts:?}");
    }
    assert!(starts[4] - starts[0] < Duration::from_secs(3), "{:?}", starts[4] - starts[0]);
}
