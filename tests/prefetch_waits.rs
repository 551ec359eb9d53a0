#![cfg(feature = "redis")]
//! A prefetching call on a key out of permits waits for at most one refill
//! it did not send: calls that find a refill in flight share its denial
//! instead of queueing one refill each behind it. This test's own Redis is
//! slowed (a second connection keeps it in `DEBUG SLEEP`), so a queue of
//! refills would add up to far more than the response timeout; the load is
//! a count of calls, and the bound asserted is the response timeout, which
//! the code guarantees.

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
    let server = RedisServer::start_with(free_port(), &["--enable-debug-command", "yes"], None);
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
