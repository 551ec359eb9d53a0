//! The same behaviour on a real Redis Cluster (3 masters, 3 replicas on
//! loopback): every convention (one test each, on one cluster they share),
//! parity with the memory twin, scripts on every node, hostile keys, and a
//! master failover under load (each of these two on a cluster of its own).

#[path = "../cases/behaviour.rs"]
mod behaviour;

use once_cell::sync::OnceCell;
use redlimit::{Limiter, ManualClock, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::redis_cluster::RedisCluster;
use std::process::Command;
use std::time::{Duration, Instant};

/// The script of the gcra policy the behaviour cases run (on a manual
/// clock), as a cluster of Redis 7 runs it: flagged to batch across slots.
fn gcra_script_hash() -> [String; 1] {
    let source = redlimit::__private::cross_slot_script_source(&Policy::gcra("3/1s", 2).unwrap(), false);
    [redis::Script::new(&source).get_hash().to_string()]
}

fn exists_on(port: u16, hashes: &[String]) -> usize {
    let exists =
        cli(port, &[&["SCRIPT", "EXISTS"][..], &hashes.iter().map(String::as_str).collect::<Vec<_>>()].concat());
    exists.lines().filter(|l| l.trim() == "1").count()
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cluster the conventions share, started by the first of them; its
/// nodes are killed when this test binary exits. Each convention uses its
/// own limiter names, and connects on its own test's runtime.
fn shared_cluster() -> &'static RedisCluster {
    static CLUSTER: OnceCell<RedisCluster> = OnceCell::new();
    CLUSTER.get_or_init(RedisCluster::start)
}

/// The memory store and a store on the shared cluster, on one manual clock.
struct MemoryAndCluster {
    clock: ManualClock,
    memory: Store,
    on_cluster: Store,
}

impl MemoryAndCluster {
    async fn start() -> MemoryAndCluster {
        let store = Store::redis(&shared_cluster().url()).await.unwrap();
        let clock = ManualClock::new();
        MemoryAndCluster {
            memory: Store::memory().with_clock(clock.clone()),
            on_cluster: store.with_clock(clock.clone()),
            clock,
        }
    }

    fn each(&self) -> [(&'static str, &Store); 2] {
        [("memory", &self.memory), ("cluster", &self.on_cluster)]
    }
}

#[tokio::test]
async fn remaining_counts_down_after_each_request() {
    let stores = MemoryAndCluster::start().await;
    behaviour::remaining_counts_down_after_each_request(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn a_denial_consumes_nothing() {
    let stores = MemoryAndCluster::start().await;
    behaviour::a_denial_consumes_nothing(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn retry_after_is_rounded_up_and_obeying_it_succeeds() {
    let stores = MemoryAndCluster::start().await;
    behaviour::retry_after_is_rounded_up_and_obeying_it_succeeds(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn a_cost_that_can_never_pass_is_denied_without_retry_after() {
    let stores = MemoryAndCluster::start().await;
    behaviour::a_cost_that_can_never_pass_is_denied_without_retry_after(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn cost_zero_takes_nothing_and_reports_the_state() {
    let stores = MemoryAndCluster::start().await;
    behaviour::cost_zero_takes_nothing_and_reports_the_state(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn peek_gives_the_check_answer_without_taking_it() {
    let stores = MemoryAndCluster::start().await;
    behaviour::peek_gives_the_check_answer_without_taking_it(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn windows_are_half_open() {
    let stores = MemoryAndCluster::start().await;
    behaviour::windows_are_half_open(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn rates_are_exact() {
    let stores = MemoryAndCluster::start().await;
    behaviour::rates_are_exact(&stores.each(), &stores.clock).await;
}

#[tokio::test]
async fn multi_strategy_is_all_or_nothing_and_names_every_violation() {
    let stores = MemoryAndCluster::start().await;
    behaviour::multi_strategy_is_all_or_nothing_and_names_every_violation(&stores.each(), &stores.clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_on_every_master_and_keys_spread_over_them() {
    // Its own cluster: it flushes every node's scripts, and counts keys.
    let cluster = RedisCluster::start();
    let store = Store::redis(&cluster.url()).await.unwrap();
    assert_eq!(store.kind(), "redis");

    // No script is loaded before a limiter's first call (a replica that
    // takes over answers NOSCRIPT once and gets them then; see the failover test).
    for &m in &cluster.masters() {
        let node = &cluster.nodes[m];
        assert_eq!(exists_on(node.port(), &gcra_script_hash()), 0, "node {}", node.port());
    }

    let clock = ManualClock::new();
    let on_cluster = store.clone().with_clock(clock.clone());

    // A policy's own script is loaded on every master with its first call.
    let policy = Policy::gcra("3/1s", 2).unwrap();
    Limiter::new("own-script", policy, &on_cluster).check("k", 1).await.unwrap();
    let own = gcra_script_hash();
    for &m in &cluster.masters() {
        assert_eq!(exists_on(cluster.nodes[m].port(), &own), 1, "node {}", cluster.nodes[m].port());
    }

    // Keys of one limiter spread over every master, braces included, and
    // each decision still touches one slot: no CROSSSLOT, every key its own limit.
    let limiter = Limiter::new("spread", Policy::sliding_log("1/1h").unwrap(), &on_cluster);
    let keys: Vec<String> = (0..60).map(|i| format!("user-{i}-{{tag{}}}-}}{{", i % 7)).collect();
    for key in &keys {
        assert!(limiter.check(key, 1).await.unwrap().allowed, "{key}");
    }
    for key in &keys {
        assert!(!limiter.check(key, 1).await.unwrap().allowed, "{key}");
    }
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    for &m in &masters {
        let size: u64 = cli(cluster.nodes[m].port(), &["DBSIZE"]).trim().parse().unwrap();
        assert!(size > 0, "master {} holds no key: keys did not spread", cluster.nodes[m].port());
    }

    // A node that lost its scripts (as a new or restarted node would) gets
    // them again on NOSCRIPT, invisibly to callers.
    for node in &cluster.nodes {
        cli(node.port(), &["SCRIPT", "FLUSH"]);
    }
    let fresh = Limiter::new("after-flush", Policy::gcra("1/1s", 3).unwrap(), &on_cluster);
    for key in &keys {
        assert!(fresh.check(key, 1).await.is_ok());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_resume_after_a_master_fails_over() {
    let mut cluster = RedisCluster::start();
    let options = RedisOptions::default()
        .with_response_timeout(Duration::from_millis(200))
        .with_retry_interval(Duration::from_millis(100));
    let store = Store::redis_with(&cluster.url(), options).await.unwrap();
    let limiter = Limiter::new("failover", Policy::token_bucket(1_000_000, "1000/1s").unwrap(), &store)
        .with_on_error(OnError::Deny);

    // Steady load over keys on every master; then kill one master.
    let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
    for key in &keys {
        limiter.limit(key, 1).await.expect("healthy cluster decides");
    }
    let victim = cluster.masters()[0];
    cluster.nodes[victim].kill();
    let killed_at = Instant::now();

    // Every call goes through on_error (deny) until the replica takes over;
    // measure the gap until every key is decided by Redis again.
    let mut last_failure = Instant::now();
    let mut longest_call = Duration::ZERO;
    while killed_at.elapsed() < Duration::from_secs(20) {
        let mut all_ok = true;
        for key in &keys {
            let started = Instant::now();
            let result = limiter.limit(key, 1).await;
            longest_call = longest_call.max(started.elapsed());
            if let Err(denied) = result {
                assert_eq!(
                    denied.reason(),
                    redlimit::DenialReason::StoreUnavailable,
                    "only store failures may deny here"
                );
                all_ok = false;
                last_failure = Instant::now();
            }
        }
        if all_ok && last_failure.elapsed() > Duration::from_millis(500) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gap = last_failure.duration_since(killed_at);
    println!(
        "failover gap {gap:?}, longest call {longest_call:?}, {} store errors\n{}",
        limiter.store_errors(),
        cluster.describe()
    );
    assert!(limiter.store_errors() > 0, "the kill was not noticed");
    assert!(gap < Duration::from_secs(8), "decisions resumed only after {gap:?}");
    assert!(longest_call < Duration::from_secs(2), "a call took {longest_call:?}");
}
