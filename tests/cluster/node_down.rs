//! One master killed: its keys fail, by `on_error`, and every other
//! master's keys are decided as before.

use redlimit::{DenialReason, Limiter, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::redis_cluster::{key_slot, RedisCluster};
use std::sync::Arc;
use std::time::Duration;

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

fn limiter(store: &Store) -> Limiter {
    Limiter::new("node-down", Policy::token_bucket(1_000_000, "1000/1s").unwrap(), store).with_on_error(OnError::Deny)
}

/// What the calls on each side got.
#[derive(Debug, Default)]
struct Tally {
    healthy_answered: u64,
    healthy_failed: Vec<String>,
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
                    match (limiter.limit(key, 1).await, on_victim) {
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
