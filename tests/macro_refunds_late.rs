#![cfg(feature = "redis")]
//! The reproduction on Redis's own clock, through the attribute:
//! `refund_on = "err"` bodies admitted in one window that fail after it
//! ended, while the next window fills, gave their permits to that next
//! window (10 successful calls within 160 ms at a limit of 5; here 5 per
//! 500 ms, so a busy machine still fits a run in one window). Time is
//! real here; a run is judged only when it fit in the next window (timed
//! from the outside, an upper bound of what Redis saw), else tried again.

use redlimit::{rate_limit, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, PartialEq)]
enum Upstream {
    Failed,
    Limited,
}

impl From<redlimit::RateLimited> for Upstream {
    fn from(_: redlimit::RateLimited) -> Self {
        Upstream::Limited
    }
}

/// Holds the bodies that fail late until the test lets them end.
static LATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);
/// How many bodies that fail late were admitted and run, this run.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

#[rate_limit(algo = "fixed_window", strategies = "5/500ms", name = "late", key = "<run>", refund_on = "err")]
async fn upstream(run: u32, fails_late: bool) -> Result<(), Upstream> {
    if fails_late {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        LATE.acquire().await.unwrap().forget();
        return Err(Upstream::Failed);
    }
    Ok(())
}

/// Successful calls in the window after the late bodies' one, their
/// refunds made inside it; `None` when the run outlasted that window.
async fn one_run(run: u32) -> Option<usize> {
    RUNNING.store(0, Ordering::SeqCst);
    let late: Vec<_> = (0..5).map(|_| tokio::spawn(upstream(run, true))).collect();
    for _ in 0..10_000 {
        if RUNNING.load(Ordering::SeqCst) == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(RUNNING.load(Ordering::SeqCst), 5, "every late body was admitted");
    // Denied until their window ends (at most 501 ms): the first success
    // starts the next window, no earlier than `started`.
    let mut started = None;
    for _ in 0..10_000 {
        let before = Instant::now();
        if upstream(run, false).await.is_ok() {
            started = Some(before);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = started.expect("the late bodies' window ended");
    let mut succeeded = 1;
    for _ in 0..4 {
        succeeded += usize::from(upstream(run, false).await.is_ok());
    }
    // The late bodies fail now and are refunded.
    LATE.add_permits(5);
    for task in late {
        assert_eq!(task.await.unwrap(), Err(Upstream::Failed));
    }
    for _ in 0..5 {
        succeeded += usize::from(upstream(run, false).await.is_ok());
    }
    (started.elapsed() < Duration::from_millis(450)).then_some(succeeded)
}

#[tokio::test]
async fn refund_on_err_bodies_that_fail_after_their_window_lend_nothing_to_the_next_on_redis_clock() {
    let server = RedisServer::start();
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    redlimit::init(Store::redis_with(&server.url(), patient).await.unwrap()).unwrap();
    let mut judged = 0;
    for run in 0..8 {
        if let Some(succeeded) = one_run(run).await {
            assert_eq!(succeeded, 5, "run {run}: successful calls in one window of 5");
            judged += 1;
        }
    }
    assert!(judged > 0, "no run fit in one window of 500 ms");
    println!("{judged} of 8 runs judged");
}
