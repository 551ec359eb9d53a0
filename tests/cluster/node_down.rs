//! One master killed or stopped (SIGSTOP: its sockets stay open, nothing
//! answers): its keys fail, by `on_error`, and every other master's keys
//! are decided as before, none waiting on it; a store starts while a
//! master is down, and its keys are decided again once it is back.

use redlimit::{DenialReason, Error, Limiter, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::redis_cluster::{key_slot, RedisCluster};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A short retry interval, so a down master's keys are tried often; a
/// response timeout a loaded machine's healthy calls stay well within.
fn options() -> RedisOptions {
    RedisOptions::default()
        .with_response_timeout(Duration::from_secs(5))
        .with_retry_interval(Duration::from_millis(100))
}

/// The keys, each its own hash tag (the storage key's slot is the tag's), and
/// which of them the master `victim` serves.
fn keys(cluster: &RedisCluster, victim: usize) -> Vec<(String, bool)> {
    let owners = cluster.slot_owners();
    (0..300)
        .map(|i| {
            let tag = format!("k{i}");
            let on_victim = owners[key_slot(tag.as_bytes())] == Some(victim);
            (format!("{{{tag}}}"), on_victim)
        })
        .collect()
}

/// For a master that is stopped or down from the start: each call on its
/// keys while its breaker is closed waits out the response timeout, so
/// the breaker stays open long enough for the other calls to go by.
fn down_options() -> RedisOptions {
    RedisOptions::default().with_response_timeout(Duration::from_secs(3)).with_retry_interval(Duration::from_secs(10))
}

fn limiter(store: &Store) -> Limiter {
    Limiter::new("node-down", Policy::token_bucket(1_000_000, "1000/1s").unwrap(), store).with_on_error(OnError::Deny)
}

/// What the calls on each side got.
#[derive(Debug, Default)]
struct Tally {
    healthy_answered: u64,
    healthy_failed: Vec<String>,
    /// The longest a call on a healthy master's key took.
    healthy_longest: Duration,
    victim_answered: u64,
    victim_failed: u64,
}

/// `total` calls from a few tasks at once (so they batch), over every key in turn.
async fn calls(limiter: &Limiter, keys: &Arc<Vec<(String, bool)>>, total: usize) -> Tally {
    const TASKS: usize = 8;
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (limiter, keys) = (limiter.clone(), keys.clone());
            tokio::spawn(async move {
                let mut tally = Tally::default();
                for i in (t..total).step_by(TASKS) {
                    let (key, on_victim) = &keys[i % keys.len()];
                    let started = Instant::now();
                    let result = limiter.limit(key, 1).await;
                    if !on_victim {
                        tally.healthy_longest = tally.healthy_longest.max(started.elapsed());
                    }
                    match (result, on_victim) {
                        (Ok(_), false) => tally.healthy_answered += 1,
                        (Ok(_), true) => tally.victim_answered += 1,
                        (Err(denied), on_victim) => {
                            assert_eq!(denied.reason(), DenialReason::StoreUnavailable, "{key}: {denied}");
                            match on_victim {
                                true => tally.victim_failed += 1,
                                false => tally.healthy_failed.push(format!("{key}: {denied}")),
                            }
                        }
                    }
                }
                tally
            })
        })
        .collect();
    let mut all = Tally::default();
    for task in tasks {
        let tally = task.await.unwrap();
        all.healthy_answered += tally.healthy_answered;
        all.healthy_failed.extend(tally.healthy_failed);
        all.healthy_longest = all.healthy_longest.max(tally.healthy_longest);
        all.victim_answered += tally.victim_answered;
        all.victim_failed += tally.victim_failed;
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_only_its_own_keys() {
    let mut cluster = RedisCluster::start();
    let store = Store::redis_with(&cluster.url(), options()).await.unwrap();
    let limiter = limiter(&store);
    let victim = cluster.masters()[0];
    let keys = Arc::new(keys(&cluster, victim));
    let on_victim = keys.iter().filter(|(_, v)| *v).count();
    assert!(on_victim > 0 && on_victim < keys.len(), "{on_victim} of the keys on the victim");
    // Every key decided once, so the store knows the nodes before one goes.
    let before = calls(&limiter, &keys, keys.len()).await;
    assert!(before.healthy_failed.is_empty() && before.victim_failed == 0, "{before:?}");

    cluster.nodes[victim].kill();
    let tally = calls(&limiter, &keys, 2_000).await;
    println!("one master killed: {tally:?}; {} store errors", limiter.store_errors());
    assert!(tally.healthy_failed.is_empty(), "healthy masters' keys failed: {:#?}", tally.healthy_failed);
    assert!(tally.healthy_answered > 1_000, "{tally:?}");
    assert!(tally.victim_failed > 0, "the victim's failure was not seen: {tally:?}");
}

/// The cluster keeps serving the other masters' slots while one is down,
/// and no replica takes the down one's over: its keys stay down until it
/// is back, whatever the machine's speed.
fn no_failover(cluster: &RedisCluster) {
    for node in &cluster.nodes {
        for (name, value) in [("cluster-require-full-coverage", "no"), ("cluster-replica-no-failover", "yes")] {
            assert_eq!(node.cli(&["CONFIG", "SET", name, value]).trim(), "OK", "{name} on {}", node.port());
        }
    }
}

/// Calls every key of `keys` once, again and again (a pause between
/// rounds), until every one is decided by Redis; panics after `rounds`.
async fn until_every_key_answers(limiter: &Limiter, keys: &[(String, bool)], rounds: usize) {
    let mut failing = Vec::new();
    for _ in 0..rounds {
        failing.clear();
        for (key, _) in keys {
            if let Err(e) = limiter.check(key, 1).await {
                failing.push(format!("{key}: {e}"));
            }
        }
        if failing.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{} keys still fail, e.g. {:?}", failing.len(), failing.first());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_master_holds_up_only_its_own_keys() {
    let cluster = RedisCluster::start();
    no_failover(&cluster);
    let store = Store::redis_with(&cluster.url(), down_options()).await.unwrap();
    let limiter = limiter(&store);
    let victim = cluster.masters()[0];
    let keys = Arc::new(keys(&cluster, victim));
    let before = calls(&limiter, &keys, keys.len()).await;
    assert!(before.healthy_failed.is_empty() && before.victim_failed == 0, "{before:?}");

    // Frozen: its connections stay open and its replies never come.
    cluster.nodes[victim].signal("STOP");
    const CALLS: usize = 600;
    let tally = calls(&limiter, &keys, CALLS).await;
    println!("one master stopped: {tally:?}; {} store errors", limiter.store_errors());
    assert!(tally.healthy_failed.is_empty(), "healthy masters' keys failed: {:#?}", tally.healthy_failed);
    let healthy = (0..CALLS).filter(|i| !keys[i % keys.len()].1).count() as u64;
    assert_eq!(tally.healthy_answered, healthy, "{tally:?}");
    // What the code guarantees any call, and a healthy key's call would
    // have failed past it: none waited out the stopped master.
    assert!(tally.healthy_longest < down_options().response_timeout, "{tally:?}");
    assert!(tally.victim_failed > 0 && tally.victim_answered == 0, "{tally:?}");

    // Back: its keys are decided again, the others still are.
    cluster.nodes[victim].signal("CONT");
    until_every_key_answers(&limiter, &keys, 100).await;
}

/// A store started while master `victim` is down (`down` does it): it
/// starts, decides the other masters' keys, fails the victim's with an
/// unavailability, and decides them once `up` brings the victim back.
async fn starts_while_a_master_is_down(
    down: impl FnOnce(&mut RedisCluster, usize),
    up: impl FnOnce(&mut RedisCluster, usize),
) {
    let mut cluster = RedisCluster::start();
    no_failover(&cluster);
    let victim = cluster.masters()[0];
    let keys = keys(&cluster, victim);
    down(&mut cluster, victim);

    // The victim is one of the URL's seeds.
    let url = cluster.url();
    assert!(url.contains(&cluster.nodes[victim].port().to_string()), "{url}");
    let store = Store::redis_with(&url, down_options()).await.expect("a store starts with one master down");
    let limiter = limiter(&store);
    let mut victim_errors = Vec::new();
    for (key, on_victim) in &keys {
        match (limiter.check(key, 1).await, on_victim) {
            (Ok(decision), false) => assert!(decision.allowed, "{key}: {decision:?}"),
            (Err(e), true) => victim_errors.push(e),
            (result, _) => panic!("{key} (on the down master: {on_victim}): {result:?}"),
        }
    }
    assert!(!victim_errors.is_empty());
    for error in &victim_errors {
        assert!(error.is_unavailable(), "{error:?}");
    }
    // After the first failure, its breaker answers at once, naming why.
    assert!(
        victim_errors.iter().any(|e| matches!(e, Error::Unavailable(_)) && e.to_string().contains("not asked again")),
        "{victim_errors:?}"
    );

    up(&mut cluster, victim);
    until_every_key_answers(&limiter, &keys, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_starts_while_a_master_is_stopped() {
    starts_while_a_master_is_down(
        |cluster, victim| cluster.nodes[victim].signal("STOP"),
        |cluster, victim| cluster.nodes[victim].signal("CONT"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_starts_while_a_master_is_killed() {
    starts_while_a_master_is_down(
        |cluster, victim| cluster.nodes[victim].kill(),
        // Restarted with its own node configuration: the same node, empty.
        |cluster, victim| cluster.nodes[victim].restart(),
    )
    .await;
}
