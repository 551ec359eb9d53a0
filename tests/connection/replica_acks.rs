//! `RedisOptions::with_replica_acks`: a call is answered only once a
//! replica has its writes, so what was answered survives a failover. A
//! stopped replica (SIGSTOP) makes calls fail, settled by `on_error`; a
//! master killed right after admitted calls loses none of them.

use redlimit::{DenialReason, Error, Limiter, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::redis_sentinel::SentinelSet;
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: u64 = 20;

fn acked() -> RedisOptions {
    // A response timeout well past the wait, so a missing acknowledgement
    // says so instead of timing out on a busy machine.
    RedisOptions::default()
        .with_response_timeout(Duration::from_secs(2))
        .with_replica_acks(1, Duration::from_millis(200))
        .with_retry_interval(Duration::from_millis(50))
}

fn limiter(store: &Store, name: &str) -> Limiter {
    let policy = Policy::fixed_window(&format!("{LIMIT}/1h")).unwrap();
    Limiter::new(name, policy, store).with_deny_cache(false)
}

/// A master and one replica in sync with it.
fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start();
    let port = master.port().to_string();
    let replica =
        RedisServer::start_with(free_port(), &["--appendonly", "no", "--replicaof", "127.0.0.1", &port], None);
    let deadline = Instant::now() + Duration::from_secs(40);
    while !replica.cli(&["INFO", "replication"]).contains("master_link_status:up") {
        assert!(Instant::now() < deadline, "the replica did not sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    (master, replica)
}

fn unacknowledged(error: &Error) -> bool {
    matches!(error, Error::Server(_)) && error.to_string().contains("replicas asked had its writes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_answered_only_once_a_replica_has_it() {
    let (master, replica) = master_and_replica();
    let store = Store::redis_with(&master.url(), acked()).await.unwrap();
    let limiter = limiter(&store, "acked").with_on_error(OnError::Deny);
    for _ in 0..3 {
        assert!(limiter.check("k", 1).await.unwrap().allowed);
    }

    replica.signal("STOP");
    for _ in 0..3 {
        let error = limiter.check("k", 1).await.unwrap_err();
        assert!(unacknowledged(&error), "{error}");
        assert!(!error.is_unavailable(), "Redis is up: no breaker opens ({error})");
    }
    let errors_before = limiter.store_errors();
    let settled = limiter.limit("k", 1).await.unwrap_err();
    assert_eq!(settled.reason(), DenialReason::StoreUnavailable, "on_error settled it");
    assert_eq!(limiter.store_errors(), errors_before + 1, "counted as a store error");
    // A peek writes nothing, but its `WAIT` covers the connection's unacknowledged writes.
    let error = limiter.peek("k", 1).await.unwrap_err();
    assert!(unacknowledged(&error), "{error}");

    replica.signal("CONT");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut unacknowledged_since = 0;
    loop {
        match limiter.check("k", 1).await {
            Ok(decision) => {
                assert!(decision.allowed);
                // The 3 admitted, the 4 unacknowledged, those since, and this one: all counted.
                assert_eq!(decision.remaining, LIMIT - 8 - unacknowledged_since);
                break;
            }
            Err(e) => {
                assert!(unacknowledged(&e), "{e}");
                unacknowledged_since += 1;
            }
        }
        assert!(Instant::now() < deadline, "no call passed after the replica resumed");
    }
}

/// A batch pays one `WAIT`, and fails as a whole when it is not acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_acknowledged_as_a_whole() {
    let (master, replica) = master_and_replica();
    let store = Store::redis_with(&master.url(), acked()).await.unwrap();
    let limiter = Arc::new(limiter(&store, "batch"));
    let calls = |keys: u64| {
        let limiter = limiter.clone();
        async move {
            let tasks: Vec<_> = (0..keys)
                .map(|i| {
                    let limiter = limiter.clone();
                    tokio::spawn(async move { limiter.check(format!("k{i}"), 1).await })
                })
                .collect();
            let mut results = Vec::new();
            for task in tasks {
                results.push(task.await.unwrap());
            }
            results
        }
    };
    assert!(calls(50).await.iter().all(|r| matches!(r, Ok(d) if d.allowed)));
    let waits = || {
        let stats = master.cli(&["INFO", "commandstats"]);
        let line = stats.lines().find(|l| l.starts_with("cmdstat_wait:")).unwrap_or("calls=0,");
        line.split("calls=").nth(1).and_then(|rest| rest.split(',').next()).unwrap().parse::<u64>().unwrap()
    };
    let (evals, wait_count) = (master.evalsha_calls().await, waits());
    assert_eq!(evals, wait_count, "one WAIT per script call");
    eprintln!("50 calls: {evals} script calls, each with its WAIT");

    replica.signal("STOP");
    let failed = calls(50).await;
    replica.signal("CONT");
    for result in &failed {
        let error = result.as_ref().unwrap_err();
        assert!(unacknowledged(error), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_master_loses_no_answered_call() {
    // Two replicas: the one promoted needs a replica of its own to acknowledge.
    let set = Arc::new(SentinelSet::start("acked", 2));
    let old = set.nodes[0].port();
    let store = Store::redis_with(&set.url(), acked()).await.unwrap();
    let limiter = limiter(&store, "crash");
    let mut admitted = 0;
    for _ in 0..5 {
        admitted += u64::from(limiter.check("k", 1).await.unwrap().allowed);
    }
    // Stop the replicas so the next calls cannot be acknowledged: none is
    // answered, whatever the replicas get of them.
    set.nodes[1].signal("STOP");
    set.nodes[2].signal("STOP");
    for _ in 0..5 {
        let error = limiter.check("k", 1).await.unwrap_err();
        assert!(unacknowledged(&error), "{error}");
    }
    // The master dies right after; the replica, resumed, is promoted.
    set.nodes[0].signal("KILL");
    set.nodes[1].signal("CONT");
    set.nodes[2].signal("CONT");
    let watcher = {
        let set = set.clone();
        tokio::task::spawn_blocking(move || set.wait_named_other_than(old, Duration::from_secs(60)))
    };
    let (_, named) = watcher.await.unwrap();
    assert!(set.nodes[1..].iter().any(|n| n.port() == named), "a replica was promoted");

    // Until the other replica follows the new master, its calls are not acknowledged.
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        match limiter.peek("k", 1).await {
            Ok(decision) => break decision,
            Err(e) => assert!(e.is_unavailable() || unacknowledged(&e), "{e}"),
        }
        assert!(Instant::now() < deadline, "the new master never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // A peek answers as a check would: what remains once its own cost is taken.
    let counted = LIMIT - 1 - first.remaining;
    eprintln!("{admitted} answered allowed before the crash; the new master counts {counted}");
    assert!(counted >= admitted, "the new master counts {counted} of the {admitted} answered calls");
    assert!(counted <= admitted + 5, "{counted} counted: only the unacknowledged calls may add");
}
