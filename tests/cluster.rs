//! The same behaviour on a real Redis Cluster (3 masters, 3 replicas on
//! loopback): every convention, parity with the memory twin, scripts on
//! every node, hostile keys, and a master failover under load.

mod behaviour;

use ratelimit::{Limiter, ManualClock, OnError, Policy, RedisOptions, Store};
use ratelimit_examples::redis_cluster::RedisCluster;
use std::process::Command;
use std::time::{Duration, Instant};

/// The script of the gcra policy the behaviour cases run (on a manual clock).
fn gcra_script_hash() -> [String; 1] {
    [redis::Script::new(&ratelimit::script_source(&Policy::gcra("3/1s", 2).unwrap(), false)).get_hash().to_string()]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_behaviour_holds_on_a_cluster() {
    let cluster = RedisCluster::start();
    let store = Store::redis(&cluster.url()).await.unwrap();
    assert_eq!(store.backend().kind(), "redis");

    // No script is loaded before a limiter's first call (a replica that
    // takes over answers NOSCRIPT once and gets them then; see the failover test).
    for &m in &cluster.masters() {
        let node = &cluster.nodes[m];
        assert_eq!(exists_on(node.port(), &gcra_script_hash()), 0, "node {}", node.port());
    }

    let clock = ManualClock::new();
    let memory = Store::memory().with_clock(clock.clone());
    let on_cluster = store.clone().with_clock(clock.clone());
    behaviour::all(&[("memory", &memory), ("cluster", &on_cluster)], &clock).await;

    // A policy's own script was loaded on every master with its first call.
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
    let options = RedisOptions {
        response_timeout: Duration::from_millis(200),
        retry_interval: Duration::from_millis(100),
        ..RedisOptions::default()
    };
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
                assert!(denied.store_unavailable, "only store failures may deny here");
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
