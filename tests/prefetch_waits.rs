#![cfg(feature = "redis")]
//! A prefetching call on a key out of permits waits for at most one refill
//! it did not send: calls that find a refill in flight share its denial
//! instead of queueing one refill each behind it. Under load, this test's
//! own Redis is slowed (a second connection keeps it in `DEBUG SLEEP`), so
//! a queue of refills would add up to far more than the response timeout;
//! the load is a count of calls, and the bound asserted is the response
//! timeout, which the code guarantees. Calls polled in one task
//! (`join_all`) reach the limiter in the order written, so what they share
//! is counted exactly.

use futures_util::future::join_all;
use futures_util::FutureExt;
use redlimit::{Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TASKS: usize = 200;
const CALLS_PER_TASK: usize = 5;

/// Keeps `url`'s server asleep 2 ms at a time until `stop`: every command
/// waits for a gap between two sleeps, as if the server were that far away.
async fn slow_down(url: String, stop: Arc<AtomicBool>) {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    while !stop.load(Ordering::Relaxed) {
        let _: () = redis::cmd("DEBUG").arg("SLEEP").arg("0.002").query_async(&mut connection).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_a_denied_key_share_the_refills_denial_and_return_within_the_response_timeout() {
    let server = RedisServer::start_on(free_port, &["--enable-debug-command", "yes"], None);
    let store = Store::redis(&server.url()).await.unwrap();
    // No deny cache: every call that is not shared reaches the store.
    let limiter = Limiter::new("denied-hot", Policy::fixed_window("1/1h").unwrap(), &store)
        .with_deny_cache(false)
        .with_prefetch(100)
        .unwrap();
    assert!(limiter.check("hot", 1).await.unwrap().allowed);

    let stop = Arc::new(AtomicBool::new(false));
    let slowing = tokio::spawn(slow_down(server.url(), stop.clone()));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut longest = Duration::ZERO;
                for _ in 0..CALLS_PER_TASK {
                    let started = Instant::now();
                    let decision = limiter.check("hot", 1).await.unwrap();
                    longest = longest.max(started.elapsed());
                    assert!(!decision.allowed, "the window's one permit was spent");
                    assert!(decision.retry_after.is_some(), "a shared denial keeps its retry_after");
                }
                longest
            })
        })
        .collect();
    let mut longest = Duration::ZERO;
    for task in tasks {
        longest = longest.max(task.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    slowing.await.unwrap();

    let timeout = RedisOptions::default().response_timeout;
    assert!(longest < timeout, "a call took {longest:?}, past the response timeout of {timeout:?}");
}

/// A key whose last refill was denied: the calls that come while the next
/// refill is in flight wait for it and share its denial, so the store
/// decides one call for all of them.
#[tokio::test]
async fn calls_that_come_during_a_denied_refill_share_its_denial_in_one_script_call() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("denied-share", Policy::fixed_window("1/1h").unwrap(), &store)
        .with_deny_cache(false)
        .with_prefetch(100)
        .unwrap();
    assert!(limiter.check("hot", 1).await.unwrap().allowed);
    let first = limiter.check("hot", 1).await.unwrap();
    assert!(!first.allowed);
    let before = server.evalsha_calls().await;
    let calls = join_all((0..24).map(|_| limiter.check("hot", 1))).await;
    let script_calls = server.evalsha_calls().await - before;
    for decision in calls {
        let decision = decision.unwrap();
        assert!(!decision.allowed);
        let retry = decision.retry_after.expect("a denial of a window names when it ends");
        assert!(retry <= first.retry_after.unwrap(), "counted down from the shared denial");
    }
    assert_eq!(script_calls, 1, "one refill, its denial shared by the 23 calls that came while it was in flight");
}

/// A refill dropped while calls wait for it (its caller cancelled) wakes
/// them: each makes its own call, none hangs.
#[tokio::test]
async fn a_cancelled_refill_wakes_the_calls_waiting_for_it() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter =
        Limiter::new("cancelled-refill", Policy::token_bucket(100, "1/1m").unwrap(), &store).with_prefetch(8).unwrap();
    for _ in 0..3 {
        limiter.check("hot", 1).await.unwrap(); // refills of 1 and 2, then one spent here
    }
    let mut refill = Box::pin(limiter.check("hot", 1)); // a refill of 4: room for 3 more
    assert!((&mut refill).now_or_never().is_none(), "sent, not answered yet");
    let mut waiting = Box::pin(limiter.check("hot", 1));
    assert!((&mut waiting).now_or_never().is_none(), "waits for the refill");
    drop(refill);
    let decision = tokio::time::timeout(RedisOptions::default().response_timeout, waiting).await;
    assert!(decision.expect("woken by the dropped refill").unwrap().allowed);
}
