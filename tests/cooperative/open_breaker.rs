//! Failing fast is an answer made in this process, and takes part in
//! tokio's cooperative budget like one: with Redis frozen (SIGSTOP) and the
//! breaker open, four tasks looping on `check` (each answered `Unavailable`
//! at once) do not delay a fifth task's timer on a 2-worker runtime, with
//! batching on and off.
//!
//! Before, such an answer was ready on first poll and spent no budget:
//! another task's 20 ms sleep overshot by half a second.

use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::timers::median_sleep_overshoot;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Fail-fast answers each looper is given at most: the loop is bounded by a count.
const LOOPS: u64 = 50_000_000;
/// Sleeps the fifth task takes; the median of their overshoots is asserted.
const SLEEPS: usize = 15;
/// The bound on how much the loopers may delay another task's timer.
const DELAY: Duration = Duration::from_millis(50);

fn signal(server: &RedisServer, which: &str) {
    let pid = server.pid().expect("a running server").to_string();
    assert!(Command::new("kill").arg(which).arg(&pid).status().unwrap().success());
}

async fn fifth_timer_while_four_loop(batching: bool) {
    let server = RedisServer::start();
    let options = RedisOptions::default()
        .with_batching(batching)
        .with_response_timeout(Duration::from_millis(100))
        .with_retry_interval(Duration::from_secs(30));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let limiter = Limiter::new("frozen", Policy::gcra("1000/1s", 999).unwrap(), &store);
    limiter.check("k", 1).await.unwrap();
    signal(&server, "-STOP");
    // The first call times out and opens the breaker; every later one fails at once.
    assert!(matches!(limiter.check("k", 1).await, Err(Error::Timeout(_))));
    assert!(matches!(limiter.check("k", 1).await, Err(Error::Unavailable(_))));

    let (stop, started) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let loopers: Vec<_> = (0..4)
        .map(|i| {
            let (limiter, stop, started) = (limiter.clone(), stop.clone(), started.clone());
            tokio::spawn(async move {
                started.fetch_add(1, Ordering::Relaxed);
                for n in 0..LOOPS {
                    if stop.load(Ordering::Relaxed) {
                        return true;
                    }
                    assert!(limiter.check(format!("k{i}-{}", n % 64), 1).await.is_err());
                }
                false
            })
        })
        .collect();
    while started.load(Ordering::Relaxed) < 2 {
        std::thread::yield_now();
    }
    let fifth = tokio::spawn(async move {
        let overshoot = median_sleep_overshoot(SLEEPS).await;
        stop.store(true, Ordering::Relaxed);
        overshoot
    });
    let overshoot = fifth.await.unwrap();
    let mut still_looping = true;
    for looper in loopers {
        still_looping &= looper.await.unwrap();
    }
    signal(&server, "-CONT");
    assert!(still_looping, "batching {batching}: the fifth task ran only once the loopers had spent their count");
    assert!(overshoot < DELAY, "batching {batching}: the fifth task's 20 ms sleeps overshot by {overshoot:?} (median)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_on_an_open_breaker_do_not_delay_another_task_batched() {
    fifth_timer_while_four_loop(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_on_an_open_breaker_do_not_delay_another_task_unbatched() {
    fifth_timer_while_four_loop(false).await;
}
