//! A call settled because its named policy is not configured is answered
//! without I/O, and still spends tokio's cooperative budget: tasks looping
//! on such calls do not delay another task's timer on a 2-worker runtime.

use redlimit::{rate_limit, RateLimited, Store};
use redlimit_test_support::timers::median_sleep_overshoot;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Calls each looper makes at most: the loop is bounded by a count.
const LOOPS: u64 = 50_000_000;
/// Sleeps the other task takes; the median of their overshoots is asserted.
const SLEEPS: usize = 15;
/// How much the loopers may delay another task's timer.
const DELAY: Duration = Duration::from_millis(50);

#[rate_limit(policy = "not-configured-anywhere", key = "<user>", on_error = "deny")]
async fn search(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_on_an_unconfigured_policy_do_not_delay_another_task() {
    let store = Store::memory();
    let (stop, started) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let loopers: Vec<_> = (0..4)
        .map(|i| {
            let (stop, started, store) = (stop.clone(), started.clone(), store.clone());
            tokio::spawn(redlimit::scope(store, async move {
                started.fetch_add(1, Ordering::Relaxed);
                for n in 0..LOOPS {
                    if stop.load(Ordering::Relaxed) {
                        return true;
                    }
                    assert!(search(i * LOOPS + n).await.is_err(), "denied: the policy is not configured");
                }
                false
            }))
        })
        .collect();
    while started.load(Ordering::Relaxed) < 2 {
        std::thread::yield_now();
    }
    let other = tokio::spawn(async move {
        let overshoot = median_sleep_overshoot(SLEEPS).await;
        stop.store(true, Ordering::Relaxed);
        overshoot
    });
    let overshoot = other.await.unwrap();
    let mut still_looping = true;
    for looper in loopers {
        still_looping &= looper.await.unwrap();
    }
    assert!(still_looping, "the other task ran only once the loopers had spent their count");
    assert!(overshoot < DELAY, "the other task's 20 ms sleeps overshot by {overshoot:?} (median)");
}
