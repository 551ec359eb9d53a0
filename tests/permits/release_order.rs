//! A permit given back is gone before the calls that follow it are decided:
//!
//! - a permit dropped (not `release().await`ed) is released before the same
//!   caller's next acquisition on that limiter is decided, on both stores,
//!   through `Limiter::acquire` and through an annotated function alike: at
//!   a limit of 1, one caller's back-to-back calls are never denied;
//! - an acquisition cancelled while it waits for its answer (here a short
//!   timeout, with batching on, so many wait in batches) holds nothing once
//!   every caller is gone: its release is ordered after it.
//!
//! Count-bounded: a fixed number of calls (200 rounds, which on the code
//! before this ordering leaked permits every run), no timing asserted.
//!
//! `cargo test --test permits release_order::` (the Redis cases need `redis-server`)

use redlimit::{rate_limit, Limiter, Policy, RateLimited, Store};

/// Back-to-back calls of one caller.
const CALLS: usize = 300;

#[rate_limit(name = "order.annotated", algo = "concurrency", limit = 1, lease = "30s", key = "one")]
async fn annotated() -> Result<(), RateLimited> {
    Ok(())
}

/// [`CALLS`] acquire-then-drop calls, then as many annotated calls, on
/// `store`: how many of each were denied.
async fn denied_back_to_back(store: &Store) -> (usize, usize) {
    let limiter = Limiter::new("order.plain", Policy::concurrency(1, "30s").unwrap(), store);
    let mut plain = 0;
    for _ in 0..CALLS {
        match limiter.acquire("one").await {
            Ok(permit) => drop(permit),
            Err(_) => plain += 1,
        }
    }
    let mut attributed = 0;
    for _ in 0..CALLS {
        if redlimit::scope(store.clone(), annotated()).await.is_err() {
            attributed += 1;
        }
    }
    (plain, attributed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_permit_never_denies_its_callers_next_call_in_memory() {
    assert_eq!(denied_back_to_back(&Store::memory()).await, (0, 0));
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use redlimit::RedisOptions;
    use redlimit_test_support::redis_server::RedisServer;
    use std::time::Duration;

    /// A store that waits long for Redis: a call let through by `on_error`
    /// on a loaded machine is not what these tests look at.
    async fn patient_store(server: &RedisServer, batching: bool) -> Store {
        let options = RedisOptions::default().with_response_timeout(Duration::from_secs(10)).with_batching(batching);
        Store::redis_with(&server.url(), options).await.unwrap()
    }

    /// The leases held in Redis on `key` of the concurrency limiter `name`.
    async fn leases_held(server: &RedisServer) -> usize {
        let client = redis::Client::open(server.url()).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("redlimit:concurrency*").query_async(&mut con).await.unwrap();
        let mut held = 0;
        for key in keys {
            let leases: usize = redis::cmd("ZCOUNT").arg(&key).arg(1).arg("+inf").query_async(&mut con).await.unwrap();
            held += leases;
        }
        held
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_permit_never_denies_its_callers_next_call_on_redis() {
        let server = RedisServer::start();
        for batching in [true, false] {
            let store = patient_store(&server, batching).await;
            assert_eq!(denied_back_to_back(&store).await, (0, 0), "batching {batching}");
        }
    }

    /// Rounds of tasks on one key, each acquiring under a timeout of a few
    /// milliseconds (so many are cancelled while their call waits in a batch,
    /// or is on its way alone) and holding what it got for a moment. Once
    /// every task has ended and the releases they sent are answered, no
    /// lease is left.
    async fn cancelled_acquisitions_leave_no_permit_held(batching: bool) {
        const ROUNDS: usize = 200;
        const TASKS: usize = 100;
        const LIMIT: u64 = 20;
        let server = RedisServer::start();
        let store = patient_store(&server, batching).await;
        let limiter = Limiter::new("order.cancelled", Policy::concurrency(LIMIT, "60s").unwrap(), &store);
        let mut rng = SmallRng::seed_from_u64(37);
        for _ in 0..ROUNDS {
            let tasks: Vec<_> = (0..TASKS)
                .map(|_| {
                    let limiter = limiter.clone();
                    let timeout = Duration::from_micros(rng.random_range(0..2_000));
                    tokio::spawn(async move {
                        if let Ok(Ok(permit)) = tokio::time::timeout(timeout, limiter.acquire("k")).await {
                            tokio::task::yield_now().await;
                            drop(permit);
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        }
        // Every task has ended: what a drop sent is answered within a
        // bounded number of tries (the store waits up to 10 s for each).
        let mut held = usize::MAX;
        for _ in 0..500 {
            held = leases_held(&server).await;
            if held == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(held, 0, "batching {batching}: leases left held by cancelled acquisitions");
        let all: Vec<_> = futures_util::future::join_all((0..LIMIT).map(|_| limiter.acquire("k"))).await;
        assert!(all.iter().all(Result::is_ok), "batching {batching}: all {LIMIT} permits free at once: {all:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_acquisitions_leave_no_permit_held_with_batching_on() {
        cancelled_acquisitions_leave_no_permit_held(true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_acquisitions_leave_no_permit_held_with_batching_off() {
        cancelled_acquisitions_leave_no_permit_held(false).await;
    }
}
