//! Group commit on a real Redis Cluster (3 masters, 3 replicas): waiting
//! calls whose keys are in several slots of one node go in one script call
//! (flagged `allow-cross-slot-keys`); when the slots have moved since the
//! runtime learnt them, the node refuses the batch unrun and its calls are
//! sent one by one, each still decided exactly once.
//!
//! User keys carry a hash tag (`{t}`), so the test knows their slots.

use futures_util::future::join_all;
use redis::Value;
use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_cluster::RedisCluster;
use std::process::Command;
use std::time::{Duration, Instant};

/// Calls per test: 8 on each of 3 keys, interleaved; more than a limiter
/// keeps in flight, few enough that `join_all` polls them in order.
const PER_KEY: usize = 8;

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn query(port: u16, cmd: &redis::Cmd) -> Value {
    let mut connection = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap().get_connection().unwrap();
    cmd.query(&mut connection).unwrap()
}

/// The port of the master serving `slot`, from `CLUSTER SLOTS` on `port`.
fn owner(port: u16, slot: u16) -> u16 {
    let Value::Array(ranges) = query(port, redis::cmd("CLUSTER").arg("SLOTS")) else { panic!("CLUSTER SLOTS") };
    for range in ranges {
        let Value::Array(fields) = range else { continue };
        if let (Value::Int(first), Value::Int(last), Value::Array(master)) = (&fields[0], &fields[1], &fields[2]) {
            if (*first..=*last).contains(&i64::from(slot)) {
                let Value::Int(port) = master[1] else { panic!("a port") };
                return port as u16;
            }
        }
    }
    panic!("no node serves slot {slot}")
}

fn slot_of(port: u16, tag: &str) -> u16 {
    cli(port, &["CLUSTER", "KEYSLOT", tag]).parse().unwrap()
}

/// `count` hash tags whose slots are all different and all served by the
/// master on `port`.
fn tags_on(port: u16, count: usize, skip: &[u16]) -> Vec<(String, u16)> {
    let mut found: Vec<(String, u16)> = Vec::new();
    for i in 0.. {
        let tag = format!("t{i}");
        let slot = slot_of(port, &tag);
        if owner(port, slot) == port && !skip.contains(&slot) && found.iter().all(|(_, s)| *s != slot) {
            found.push((tag, slot));
            if found.len() == count {
                return found;
            }
        }
    }
    unreachable!()
}

/// `PER_KEY` calls on each tag's key, interleaved and all waiting at once;
/// then checks each key got exactly what calls in sequence would: the first
/// 5 admitted with 4, 3, .. 0 left, the rest denied with none.
async fn five_of_each(limiter: &Limiter, tags: &[String]) {
    let calls = (0..PER_KEY * tags.len()).map(|i| limiter.check(format!("{{{}}}", tags[i % tags.len()]), 1));
    let decisions = join_all(calls).await;
    for (i, decision) in decisions.iter().enumerate() {
        let decision = decision.as_ref().unwrap();
        let nth = (i / tags.len()) as u64;
        assert_eq!(decision.allowed, nth < 5, "call {i} on {}: {decision:?}", tags[i % tags.len()]);
        assert_eq!(decision.remaining, 4u64.saturating_sub(nth), "call {i}: {decision:?}");
    }
}

// One thread: the calls all queue before any reply is read, so how many
// share a script call does not depend on the machine's speed.
#[tokio::test]
async fn a_batch_spans_slots_of_one_node_and_falls_back_when_the_slots_moved() {
    let cluster = RedisCluster::start();
    let store = Store::redis(&cluster.url()).await.unwrap();
    let masters: Vec<u16> = cluster.masters().into_iter().take(3).map(|i| cluster.nodes[i].port()).collect();
    let (a, b) = (masters[0], masters[1]);
    let node_a = cluster.nodes.iter().find(|n| n.port() == a).unwrap();
    let policy = Policy::fixed_window("5/1h").unwrap();

    // Three slots of one node, in one batch.
    let tags: Vec<String> = tags_on(a, 3, &[]).into_iter().map(|(tag, _)| tag).collect();
    let limiter = Limiter::new("spans-slots", policy.clone(), &store).with_deny_cache(false);
    limiter.check("{warm}", 1).await.unwrap();
    let before = node_a.evalsha_calls().await;
    five_of_each(&limiter, &tags).await;
    let sent = node_a.evalsha_calls().await - before;
    let decisions = (PER_KEY * tags.len()) as u64;
    assert!(sent < decisions / 2, "{sent} EVALSHA on the node for {decisions} decisions");

    // An empty slot of `a` moves to `b` after the runtime learnt the slots:
    // a batch grouped by the old map reaches a node that serves only some
    // of its keys, is refused unrun, and its calls go one by one.
    let used: Vec<u16> = tags.iter().map(|t| slot_of(a, t)).collect();
    let moving = tags_on(a, 2, &used);
    let (moved_tag, moved_slot) = moving[0].clone();
    let b_id = cli(b, &["CLUSTER", "MYID"]);
    for port in [b, a, masters[2]] {
        assert_eq!(cli(port, &["CLUSTER", "SETSLOT", &moved_slot.to_string(), "NODE", &b_id]), "OK");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while masters.iter().any(|&port| owner(port, moved_slot) != b) {
        assert!(Instant::now() < deadline, "slot {moved_slot} did not move: {}", cluster.describe());
        std::thread::sleep(Duration::from_millis(20));
    }
    let limiter = Limiter::new("slots-moved", policy, &store).with_deny_cache(false);
    five_of_each(&limiter, &[moving[1].0.clone(), moved_tag]).await;
    let refused = cli(a, &["INFO", "errorstats"]);
    assert!(refused.contains("errorstat_NONLOCAL:count="), "the batch was not refused: {refused}");
}
