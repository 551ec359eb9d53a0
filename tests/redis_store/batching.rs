//! Group commit on one server: calls of one limiter that wait at the same
//! time are decided in one script call, each exactly as it would have been
//! decided alone, in arrival order.
//!
//! The calls of a test are polled in one task (`join_all`), so they reach
//! the limiter in the order written: the first few go at once, each alone,
//! and the rest wait and go together in the next script call. Each is then
//! compared with the same call made in sequence, without batching.

use futures_util::future::join_all;
use redlimit::{Decision, Error, Limiter, ManualClock, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::process::Command;
use std::time::{Duration, Instant};

/// Calls sent at once in a test: more than a limiter keeps in flight, and
/// few enough that `join_all` polls them in order.
const CALLS: usize = 24;

fn every_algorithm() -> Vec<Policy> {
    vec![
        Policy::fixed_window("5/1s").unwrap(),
        Policy::fixed_window("2/1s,3/10s,5/1m").unwrap(),
        Policy::sliding_window("2/1s,3/10s,5/1m", "1s").unwrap(),
        Policy::sliding_window("7/1m", "1s").unwrap(),
        Policy::sliding_log("2/1s,3/10s,5/1m").unwrap(),
        Policy::token_bucket(5, "1/1s").unwrap(),
        Policy::leaky_bucket(5, "2/3s").unwrap(),
        Policy::gcra("1/1s", 4).unwrap(),
    ]
}

/// Costs of call i: mostly single permits, some larger, some nothing.
fn cost(i: usize) -> u64 {
    [1, 1, 2, 0, 1, 3][i % 6]
}

async fn store(server: &RedisServer, batching: bool) -> Store {
    let options = RedisOptions::default().with_batching(batching).with_response_timeout(Duration::from_secs(10));
    Store::redis_with(&server.url(), options).await.unwrap()
}

/// `CALLS` calls on one key, every one waiting at once (peeks among them
/// when `peeks`), and the same calls in sequence on a limiter that does not
/// batch.
async fn at_once_and_in_sequence(
    server: &RedisServer,
    policy: &Policy,
    clock: Option<&ManualClock>,
    name: &str,
) -> (Vec<Decision>, Vec<Decision>) {
    let (batched, sequential) = (store(server, true).await, store(server, false).await);
    let (batched, sequential) = match clock {
        Some(clock) => (batched.with_clock(clock.clone()), sequential.with_clock(clock.clone())),
        None => (batched, sequential),
    };
    let at_once = Limiter::new(format!("{name}-batched"), policy.clone(), &batched).with_deny_cache(false);
    let alone = Limiter::new(format!("{name}-alone"), policy.clone(), &sequential).with_deny_cache(false);
    let call = |limiter: &Limiter, i: usize| {
        let limiter = limiter.clone();
        async move {
            match i % 7 {
                5 => limiter.peek("k", cost(i)).await,
                _ => limiter.check("k", cost(i)).await,
            }
        }
    };
    let batched: Vec<Decision> =
        join_all((0..CALLS).map(|i| call(&at_once, i))).await.into_iter().map(Result::unwrap).collect();
    let mut sequential = Vec::new();
    for i in 0..CALLS {
        sequential.push(call(&alone, i).await.unwrap());
    }
    (batched, sequential)
}

/// On a client clock every field agrees, times included.
#[tokio::test]
async fn one_key_many_times_in_a_batch_is_decided_as_in_sequence_on_a_client_clock() {
    let server = RedisServer::start();
    for (n, policy) in every_algorithm().iter().enumerate() {
        let clock = ManualClock::new();
        let (batched, sequential) = at_once_and_in_sequence(&server, policy, Some(&clock), &format!("client{n}")).await;
        for (i, (b, s)) in batched.iter().zip(&sequential).enumerate() {
            assert_eq!(b, s, "{policy:?}, call {i} (cost {})", cost(i));
        }
        assert!(batched.iter().any(|d| d.allowed) && batched.iter().any(|d| !d.allowed), "{policy:?}: {batched:?}");
    }
}

/// On Redis's clock each call reads `TIME` itself, so only the times may
/// differ: the policies are slow enough that the calls' few ms change no count.
#[tokio::test]
async fn one_key_many_times_in_a_batch_is_decided_as_in_sequence_on_redis_clock() {
    let server = RedisServer::start();
    let slow = [
        Policy::fixed_window("5/1h").unwrap(),
        Policy::fixed_window("5/1h,7/2h").unwrap(),
        Policy::sliding_window("5/1h,7/2h", "1m").unwrap(),
        Policy::sliding_log("5/1h,7/2h").unwrap(),
        Policy::token_bucket(5, "1/1h").unwrap(),
        Policy::leaky_bucket(5, "1/1h").unwrap(),
        Policy::gcra("1/1h", 4).unwrap(),
    ];
    for (n, policy) in slow.iter().enumerate() {
        let (batched, sequential) = at_once_and_in_sequence(&server, policy, None, &format!("server{n}")).await;
        for (i, (b, s)) in batched.iter().zip(&sequential).enumerate() {
            let counts = |d: &Decision| {
                (
                    d.allowed,
                    d.limit,
                    d.remaining,
                    d.violated.clone(),
                    d.quotas.iter().map(|q| q.remaining).collect::<Vec<_>>(),
                )
            };
            assert_eq!(counts(b), counts(s), "{policy:?}, call {i} (cost {})", cost(i));
        }
    }
}

/// A batch may carry calls of several policies of one family (limiters of
/// one script): each call is decided under its own policy. Two limiters'
/// calls, interleaved and all the common call (cost 1, a check, Redis's
/// clock), then the same with some uncommon ones, against the same calls
/// in sequence without batching.
#[tokio::test]
async fn calls_of_two_policies_in_one_batch_are_each_decided_under_their_own() {
    let server = RedisServer::start();
    let pairs = [
        (Policy::gcra("1/1h", 4).unwrap(), Policy::gcra("1/1h", 9).unwrap()),
        (Policy::token_bucket(5, "1/1h").unwrap(), Policy::token_bucket(8, "2/1h").unwrap()),
        (Policy::fixed_window("5/1h").unwrap(), Policy::fixed_window("9/1h").unwrap()),
        (Policy::sliding_log("5/1h").unwrap(), Policy::sliding_log("3/1h,4/2h").unwrap()),
    ];
    let (batched, sequential) = (store(&server, true).await, store(&server, false).await);
    for (n, (a, b)) in pairs.iter().enumerate() {
        for uncommon in [false, true] {
            let limiters = |store: &Store, side: &str| {
                [(0, a), (1, b)].map(|(k, p)| {
                    Limiter::new(format!("mixed{n}-{uncommon}-{side}-{k}"), p.clone(), store).with_deny_cache(false)
                })
            };
            let (at_once, alone) = (limiters(&batched, "batched"), limiters(&sequential, "alone"));
            let call = |limiters: &[Limiter; 2], i: usize| {
                let limiter = limiters[i % 2].clone();
                let cost = if uncommon { cost(i) } else { 1 };
                async move { limiter.check("k", cost).await }
            };
            let before = server.evalsha_calls().await;
            let in_batches: Vec<Decision> =
                join_all((0..CALLS).map(|i| call(&at_once, i))).await.into_iter().map(Result::unwrap).collect();
            let sent = server.evalsha_calls().await - before;
            assert!(sent < CALLS as u64 / 2, "{a:?} and {b:?}: {sent} EVALSHA for {CALLS} calls: not batched");
            for (i, decided) in in_batches.iter().enumerate() {
                let one = call(&alone, i).await.unwrap();
                let counts = |d: &Decision| (d.allowed, d.limit, d.remaining, d.quotas.len());
                assert_eq!(counts(decided), counts(&one), "{a:?} and {b:?}, call {i}, uncommon {uncommon}");
            }
        }
    }
}

/// The calls that waited went in one script call: Redis counts far fewer
/// `EVALSHA`s than decisions; without batching, one per decision.
#[tokio::test]
async fn waiting_calls_share_one_script_call_and_the_switch_turns_it_off() {
    let server = RedisServer::start();
    let policy = Policy::gcra("100/1s", 200).unwrap();
    for (batching, name) in [(true, "shared"), (false, "single")] {
        let store = store(&server, batching).await;
        let limiter = Limiter::new(name, policy.clone(), &store);
        // Loads the script and warms the connection, so the calls below are all decisions.
        limiter.check("warm", 1).await.unwrap();
        let before = server.evalsha_calls().await;
        let decisions = join_all((0..CALLS).map(|i| limiter.check(format!("user{i}"), 1))).await;
        assert!(decisions.iter().all(|d| d.as_ref().unwrap().allowed));
        let sent = server.evalsha_calls().await - before;
        if batching {
            assert!(sent < CALLS as u64 / 2, "{sent} EVALSHA for {CALLS} decisions");
        } else {
            assert_eq!(sent, CALLS as u64);
        }
    }
}

/// A batch that fails fails each of its calls as a single call would: a
/// frozen server gives every waiting call a timeout within the bound.
#[tokio::test]
async fn a_failed_batch_fails_each_call_as_a_single_call_would() {
    let server = RedisServer::start();
    let options = RedisOptions::default().with_response_timeout(Duration::from_millis(300));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let limiter = Limiter::new("frozen-batch", Policy::sliding_log("50/1s").unwrap(), &store);
    limiter.check("warm", 1).await.unwrap();
    let pid = server.pid().unwrap().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let started = Instant::now();
    let results = join_all((0..CALLS).map(|i| limiter.check(format!("user{i}"), 1))).await;
    let took = started.elapsed();
    Command::new("kill").args(["-CONT", &pid]).status().unwrap();
    for result in &results {
        assert!(matches!(result, Err(Error::Timeout(_)) | Err(Error::Unavailable(_))), "{result:?}");
    }
    // Each call is bounded by the response timeout; the waiting ones from when they queued.
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
