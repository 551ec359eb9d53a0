//! Redis closing idle clients (`timeout 1`, as managed services and NAT
//! boxes do) is not an outage: after every idle spell, calls are decided by
//! Redis, none fails and none is settled by `on_error`, on a single server
//! and on a cluster.
//!
//! Bounded by counts: a few idle spells, each longer than Redis's idle
//! timeout (so Redis closes the connection during it), then a fixed number
//! of calls.

use redlimit::{Limiter, OnError, Policy, Store};
use redlimit_test_support::redis_cluster::RedisCluster;
use redlimit_test_support::redis_server::RedisServer;
use std::time::Duration;

const SPELLS: usize = 3;
/// Longer than Redis's one second, which it must exceed to close a client.
const IDLE: Duration = Duration::from_millis(2500);
const TASKS: usize = 8;
const CALLS_PER_TASK: usize = 3;

#[derive(Debug, Default, PartialEq)]
struct Failures {
    check: usize,
    peek: usize,
    /// Calls of `limit` that `on_error = deny` settled: Redis did not decide them.
    settled_by_on_error: usize,
    store_errors: u64,
}

/// `SPELLS` idle spells, each followed by `TASKS` tasks making
/// `CALLS_PER_TASK` checks, peeks and limits at once on their own keys.
async fn after_idle_spells(store: &Store, name: &str) -> (Failures, usize) {
    let policy = Policy::fixed_window("1000/1h").unwrap();
    // The deny cache off: every call goes to Redis.
    let check = Limiter::new(format!("{name}-check"), policy.clone(), store).with_deny_cache(false);
    let deny = Limiter::new(format!("{name}-deny"), policy, store).with_deny_cache(false).with_on_error(OnError::Deny);
    let mut failures = Failures::default();
    let mut calls = 0;
    for spell in 0..SPELLS {
        tokio::time::sleep(IDLE).await;
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (check, deny) = (check.clone(), deny.clone());
                tokio::spawn(async move {
                    let mut failures = Failures::default();
                    let key = format!("{spell}-{task}");
                    for _ in 0..CALLS_PER_TASK {
                        failures.check += usize::from(check.check(&key, 1).await.is_err());
                        failures.peek += usize::from(check.peek(&key, 1).await.is_err());
                        if let Err(denied) = deny.limit(&key, 1).await {
                            assert_eq!(
                                denied.reason(),
                                redlimit::DenialReason::StoreUnavailable,
                                "within the limit, yet denied: {denied}"
                            );
                            failures.settled_by_on_error += 1;
                        }
                    }
                    failures
                })
            })
            .collect();
        for task in tasks {
            let f = task.await.expect("no task panicked");
            failures.check += f.check;
            failures.peek += f.peek;
            failures.settled_by_on_error += f.settled_by_on_error;
            calls += 3 * CALLS_PER_TASK;
        }
    }
    failures.store_errors = check.store_errors() + deny.store_errors();
    (failures, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_disconnects_of_a_single_server_fail_no_call() {
    let server = RedisServer::start_idle_timeout(1);
    let store = Store::redis(&server.url()).await.unwrap();
    let before = server.connections_received();
    let (failures, calls) = after_idle_spells(&store, "idle-single").await;
    let reconnects = server.connections_received() - before;
    println!("{calls} calls after {SPELLS} idle spells, {reconnects} reconnects: {failures:?}");
    assert_eq!(failures, Failures::default(), "{calls} calls");
    // Redis did close the idle connection: each spell needed a new one.
    assert!(reconnects >= SPELLS as u64, "{reconnects} reconnects after {SPELLS} idle spells");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_disconnects_of_a_cluster_fail_no_call() {
    let cluster = RedisCluster::start();
    for node in &cluster.nodes {
        node.config_set("timeout", "1");
    }
    let store = Store::redis(&cluster.url()).await.unwrap();
    let before: u64 = cluster.nodes.iter().map(RedisServer::connections_received).sum();
    let (failures, calls) = after_idle_spells(&store, "idle-cluster").await;
    let reconnects = cluster.nodes.iter().map(RedisServer::connections_received).sum::<u64>() - before;
    println!("{calls} calls after {SPELLS} idle spells, {reconnects} reconnects: {failures:?}");
    assert_eq!(failures, Failures::default(), "{calls} calls");
    assert!(reconnects >= SPELLS as u64, "{reconnects} reconnects after {SPELLS} idle spells");
}
