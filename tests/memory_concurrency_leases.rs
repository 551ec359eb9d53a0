//! The memory store's concurrency permits at scale: 20,000 held on one key
//! and renewed by their own tasks through several leases, none is lost
//! while its holder lives, another caller finds the limit full, and every
//! permit comes back when dropped. Time is tokio's, paused, and the store
//! reads the same time, so the test is bounded by its count of calls, not
//! by the machine's speed. (How much work each call does, whatever the
//! permits held, is counted in `algo/concurrency.rs`'s unit tests.)

use redlimit::observe::PERMIT_LEASES_LOST_TOTAL;
use redlimit::{Clock, Limiter, Policy, Store};
use redlimit_test_support::metrics_capture;
use std::time::Duration;

/// The store's time: tokio's (paused in these tests), from a fixed start.
#[derive(Debug)]
struct TokioClock(tokio::time::Instant);

impl Clock for TokioClock {
    fn now_us(&self) -> Option<u64> {
        Some(1_767_225_600_000_000 + self.0.elapsed().as_micros() as u64)
    }
}

const HELD: u64 = 20_000;

#[tokio::test(start_paused = true)]
async fn twenty_thousand_permits_renewed_on_one_key_keep_every_lease() {
    drop(metrics_capture::recorded()); // installed before the limiter registers its metrics
    let store = Store::memory().with_clock(TokioClock(tokio::time::Instant::now()));
    let limiter = Limiter::new("many-holders", Policy::concurrency(HELD, "30s").unwrap(), &store);
    let mut permits = Vec::new();
    for n in 0..HELD {
        let permit = limiter.acquire("k").await.unwrap_or_else(|_| panic!("acquisition {n} of {HELD}"));
        permits.push(permit);
    }
    // Four leases, each renewal every third of one.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let held = permits.iter().filter(|p| p.is_held()).count() as u64;
    assert_eq!(held, HELD, "leases lost while every holder was alive");
    assert_eq!(metrics_capture::counter(PERMIT_LEASES_LOST_TOTAL, &[("limiter", "many-holders")]), 0);
    let other = limiter.acquire("k").await;
    assert!(other.is_err(), "another caller finds every permit held");
    assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 0);
    drop(permits.split_off(1));
    assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, HELD - 1, "each dropped permit came back");
    assert!(limiter.acquire("k").await.unwrap().is_held());
}
