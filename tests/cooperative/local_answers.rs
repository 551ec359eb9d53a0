//! Answers made in this process (a remembered denial, the memory store) take
//! part in tokio's cooperative budget: tasks looping on them yield like I/O,
//! so on a small runtime they cannot starve another task's call.
//!
//! Before, two tasks looping on a cached denial kept both workers of a
//! 2-thread runtime busy: another task's Redis call waited seconds and timed
//! out, with four loopers it never ran.

use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Calls the third task makes; the median of their times is what is asserted.
const CALLS: usize = 21;
/// The bound on how much the loopers may delay another task's call.
const DELAY: Duration = Duration::from_millis(50);

/// Denials each looper is answered at most: the loop is bounded by a count,
/// and without cooperation the third task ran only after it was spent.
const LOOPS: u64 = 2_000_000;

/// On the test's 2-thread runtime, two tasks loop on `hot`'s denial of key
/// "hot" while a third makes [`CALLS`] Redis calls. Returns the median time
/// of those calls (the first counted from when the task was spawned) and
/// whether the third task finished while both loopers still ran.
async fn third_call_while_two_loop(hot: Limiter, cold: Limiter) -> (Duration, bool) {
    while hot.check("hot", 1).await.unwrap().allowed {}
    let (stop, started) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let loopers: Vec<_> = (0..2)
        .map(|_| {
            let (hot, stop, started) = (hot.clone(), stop.clone(), started.clone());
            tokio::spawn(async move {
                started.fetch_add(1, Ordering::Relaxed);
                for _ in 0..LOOPS {
                    if stop.load(Ordering::Relaxed) {
                        return true;
                    }
                    assert!(!hot.check("hot", 1).await.unwrap().allowed);
                }
                false
            })
        })
        .collect();
    // Both loopers hold a worker before the third task is spawned.
    while started.load(Ordering::Relaxed) < 2 {
        std::thread::yield_now();
    }
    let spawned = Instant::now();
    let third = tokio::spawn(async move {
        let mut took = Vec::new();
        let mut asked = spawned;
        for i in 0..CALLS {
            let decision = cold.check(format!("cold-{i}"), 1).await.expect("the store answers");
            assert!(decision.allowed);
            took.push(asked.elapsed());
            asked = Instant::now();
        }
        stop.store(true, Ordering::Relaxed);
        took.sort();
        took[CALLS / 2]
    });
    let median = third.await.unwrap();
    let mut still_looping = true;
    for looper in loopers {
        still_looping &= looper.await.unwrap();
    }
    (median, still_looping)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tasks_looping_on_a_cached_denial_do_not_delay_another_tasks_call() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let hot = Limiter::new("hot", Policy::fixed_window("1/1h").unwrap(), &store);
    let cold = Limiter::new("cold", Policy::fixed_window("1/1h").unwrap(), &store);
    let before = server.evalsha_calls().await;
    let (median, still_looping) = third_call_while_two_loop(hot, cold).await;
    let calls = server.evalsha_calls().await - before;
    assert!(still_looping, "the third task ran only once the loopers had spent their count");
    assert!(median < DELAY, "the third task's calls took {median:?} (median) while two tasks looped");
    assert!(calls < 10 + CALLS as u64, "{calls} calls reached Redis: the loopers were not served by the cache");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tasks_looping_on_a_memory_denial_do_not_delay_another_tasks_call() {
    let server = RedisServer::start();
    let redis = Store::redis(&server.url()).await.unwrap();
    let hot = Limiter::new("hot", Policy::gcra("1/1h", 0).unwrap(), &Store::memory());
    let cold = Limiter::new("cold", Policy::fixed_window("1/1h").unwrap(), &redis);
    let (median, still_looping) = third_call_while_two_loop(hot, cold).await;
    assert!(still_looping, "the third task ran only once the loopers had spent their count");
    assert!(median < DELAY, "the third task's calls took {median:?} (median) while two tasks looped");
}
