//! Atomicity under concurrency: many tasks on one key admit exactly the limit.

use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

async fn admitted(limiter: &Limiter, calls: usize) -> usize {
    let tasks: Vec<_> = (0..calls)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.check("shared", 1).await.unwrap().allowed })
        })
        .collect();
    let mut passed = 0;
    for task in tasks {
        passed += usize::from(task.await.unwrap());
    }
    passed
}

/// The source documents' experiment: a sliding log of 5 per 3 s; 20 calls at
/// once, then 10 more 3 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sliding_log_5_per_3s_admits_5_of_20_then_5_of_10() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        let limiter = Limiter::new("experiment", Policy::sliding_log("5/3s").unwrap(), store);
        assert_eq!(admitted(&limiter, 20).await, 5, "{backend}: first burst");
        both.clock.advance(Duration::from_secs(3));
        assert_eq!(admitted(&limiter, 10).await, 5, "{backend}: 3 s later");
    }
}

/// 200 tasks at once on real Redis, on its own clock (`TIME`), for every
/// algorithm that is exact: each admits exactly 50. Refill rates are slow
/// enough (1 per hour) that nothing refills during the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_tasks_on_one_key_admit_exactly_the_limit() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    for policy in [
        Policy::fixed_window("50/1h").unwrap(),
        Policy::sliding_window("50/1h", "1m").unwrap(),
        Policy::sliding_log("50/1h").unwrap(),
        Policy::token_bucket(50, "1/1h").unwrap(),
        Policy::leaky_bucket(50, "1/1h").unwrap(),
        Policy::gcra("1/1h", 49).unwrap(),
    ] {
        let limiter = Limiter::new("two-hundred", policy.clone(), &store);
        assert_eq!(admitted(&limiter, 200).await, 50, "{policy}");
    }
}
