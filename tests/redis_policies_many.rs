#![cfg(feature = "redis")]
//! Limits as data: 10,000 distinct policies, one per user, every algorithm
//! and mixed numbers, each asked 10 times per call through
//! `Limiter::with_policy`. Redis loads one script per family of algorithm
//! (`redlimit::guide::policies`, "What it costs": at most 8 on a store, concurrency's among
//! them, which this test does not use: so at most 7 here), however many policies
//! it sees, and this process keeps nothing per policy: its resident memory
//! after 10,000 policies is within a bound of what it was after the first
//! 1,000 (the bound is generous; what it guards against is growth with the
//! number of policies, which would be megabytes here).

use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;

/// One script per family of algorithm: the policies guide's nine, less concurrency's.
const SCRIPTS_AT_MOST: u64 = 7;
/// How far resident memory may move between 1,000 and 10,000 policies.
const RSS_GROWTH_AT_MOST: u64 = 8 << 20;

/// User `u`'s own policy: the algorithm and numbers follow from `u`.
fn policy_of(u: u64) -> Policy {
    let (limit, seconds) = (3 + u % 97, 1 + u % 89);
    match u % 6 {
        0 => Policy::fixed_window(&format!("{limit}/{seconds}s")),
        1 => Policy::fixed_window(&format!("{limit}/{seconds}s,{}/1h", limit * 10)),
        2 => Policy::sliding_window(&format!("{limit}/{}s", seconds * 10), &format!("{seconds}s")),
        3 => Policy::sliding_log(&format!("{limit}/{seconds}s")),
        4 => Policy::token_bucket(limit, &format!("{}/{seconds}s", 1 + u % 13)),
        _ => match u % 12 {
            5 => Policy::leaky_bucket(limit, &format!("{}/{seconds}s", 1 + u % 7)),
            _ => Policy::gcra(&format!("{}/{seconds}s", 1 + u % 11), limit),
        },
    }
    .unwrap()
}

async fn info_field(con: &mut redis::aio::MultiplexedConnection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query_async(con).await.unwrap();
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).expect(field);
    line.trim().parse().unwrap()
}

/// This process's resident memory in bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Users `range`, 16 at a time, 10 calls each under their own policy.
async fn ask(limiter: &Limiter, range: std::ops::Range<u64>) -> u64 {
    let mut allowed = 0;
    let users: Vec<u64> = range.collect();
    for chunk in users.chunks(16) {
        let calls = chunk.iter().map(|&u| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let policy = policy_of(u);
                let mut allowed = 0;
                for _ in 0..10 {
                    allowed +=
                        u64::from(limiter.with_policy(&policy).check(format!("user:{u}"), 1).await.unwrap().allowed);
                }
                allowed
            })
        });
        for call in calls.collect::<Vec<_>>() {
            allowed += call.await.unwrap();
        }
    }
    allowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_policies_load_a_script_per_family_and_keep_nothing_per_policy() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let mut admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let limiter = Limiter::new("plans", Policy::gcra("1/1s", 0).unwrap(), &store);

    let mut allowed = ask(&limiter, 0..1_000).await;
    let warm = resident_bytes();
    allowed += ask(&limiter, 1_000..10_000).await;
    let after = resident_bytes();

    let scripts = info_field(&mut admin, "memory", "number_of_cached_scripts").await;
    assert!((1..=SCRIPTS_AT_MOST).contains(&scripts), "{scripts} scripts for 10,000 policies");
    assert!(
        after <= warm + RSS_GROWTH_AT_MOST,
        "resident memory grew from {warm} to {after} bytes between 1,000 and 10,000 policies"
    );
    // Every user's first 3 calls pass (every limit is at least 3); the tightest pass fewer than 10.
    assert!((30_000..100_000).contains(&allowed), "{allowed} allowed");
}
