//! Refunds in group commit: calls waiting at the same time go in one
//! script call, refunds among checks and peeks, and each is answered as it
//! would have been alone, in arrival order (see `redis_store/batching.rs`).

use futures_util::future::join_all;
use redlimit::{Decision, Limiter, ManualClock, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::time::Duration;

/// Calls sent at once: more than a limiter keeps in flight, so most wait
/// and go together; few enough that `join_all` polls them in order.
const CALLS: usize = 24;

async fn store(server: &RedisServer, batching: bool) -> Store {
    let options = RedisOptions::default().with_batching(batching).with_response_timeout(Duration::from_secs(10));
    Store::redis_with(&server.url(), options).await.unwrap()
}

/// Call i: on one of three keys, a refund every fourth (of `of`, the
/// key's first call, taken before), a peek now and then, else a check;
/// costs mostly 1, some larger, some nothing.
async fn call(limiter: Limiter, i: usize, of: &[Decision]) -> Decision {
    let key = format!("k{}", i % 3);
    let cost = [1, 1, 2, 0, 1, 3][i % 6];
    match (i % 4, i % 7) {
        (3, _) => limiter.refund(&key, cost, &of[i % 3]).await,
        (_, 5) => limiter.peek(&key, cost).await,
        _ => limiter.check(&key, cost).await,
    }
    .unwrap()
}

/// `CALLS` calls at once on a batching store, and the same calls in
/// sequence on one that does not batch; also how many script calls the
/// batched ones took.
async fn at_once_and_in_sequence(
    server: &RedisServer,
    policy: &Policy,
    clock: Option<&ManualClock>,
    name: &str,
) -> (Vec<Decision>, Vec<Decision>, u64) {
    // On Redis's clock (see the test there), the refunded calls are dated ahead.
    let named = |mut first: Decision| {
        if clock.is_none() {
            first.decided_at += Duration::from_secs(600);
        }
        first
    };
    let (batched, sequential) = (store(server, true).await, store(server, false).await);
    let (batched, sequential) = match clock {
        Some(clock) => (batched.with_clock(clock.clone()), sequential.with_clock(clock.clone())),
        None => (batched, sequential),
    };
    let at_once = Limiter::new(format!("{name}-batched"), policy.clone(), &batched).with_deny_cache(false);
    let alone = Limiter::new(format!("{name}-alone"), policy.clone(), &sequential).with_deny_cache(false);
    // Loads the script and warms the connection, so the calls below are all decisions.
    at_once.peek("warm", 1).await.unwrap();
    // Each key's first call, which the refunds name.
    let mut firsts = (Vec::new(), Vec::new());
    for i in 0..3 {
        firsts.0.push(named(at_once.check(format!("k{i}"), 1).await.unwrap()));
        firsts.1.push(named(alone.check(format!("k{i}"), 1).await.unwrap()));
    }
    let before = server.evalsha_calls().await;
    let batched = join_all((0..CALLS).map(|i| call(at_once.clone(), i, &firsts.0))).await;
    let script_calls = server.evalsha_calls().await - before;
    let mut sequential = Vec::new();
    for i in 0..CALLS {
        sequential.push(call(alone.clone(), i, &firsts.1).await);
    }
    (batched, sequential, script_calls)
}

/// On a client clock every field agrees, times included.
#[tokio::test]
async fn refunds_in_a_batch_are_answered_as_in_sequence_on_a_client_clock() {
    let server = RedisServer::start();
    let policies = [
        Policy::fixed_window("5/1s").unwrap(),
        Policy::fixed_window("2/1s,3/10s,5/1m").unwrap(),
        Policy::token_bucket(5, "1/1s").unwrap(),
        Policy::leaky_bucket(5, "2/3s").unwrap(),
        Policy::gcra("1/1s", 4).unwrap(),
    ];
    for (n, policy) in policies.iter().enumerate() {
        let clock = ManualClock::new();
        let (batched, sequential, script_calls) =
            at_once_and_in_sequence(&server, policy, Some(&clock), &format!("client{n}")).await;
        for (i, (b, s)) in batched.iter().zip(&sequential).enumerate() {
            assert_eq!(b, s, "{policy}, call {i}");
        }
        assert!(script_calls < CALLS as u64 / 2, "{policy}: {script_calls} EVALSHA for {CALLS} calls: not batched");
        assert!(batched.iter().any(|d| !d.allowed), "{policy}: some check must be denied: {batched:?}");
    }
}

/// On Redis's clock each call reads `TIME` itself, so only the times may
/// differ. The fixed window of one strategy is the counter script here.
///
/// A late refund gives a bucket back its permits less what it refilled
/// since the refunded call, and the two runs take different times, so here
/// the refunds name calls as if taken ten minutes later (still in their
/// windows, with nothing yet refilled): what they give back is then the
/// same in both runs however long each took.
#[tokio::test]
async fn refunds_in_a_batch_are_answered_as_in_sequence_on_redis_clock() {
    let server = RedisServer::start();
    let policies = [
        Policy::fixed_window("5/1h").unwrap(),
        Policy::fixed_window("5/1h,7/2h").unwrap(),
        Policy::token_bucket(5, "1/1h").unwrap(),
        Policy::leaky_bucket(5, "1/1h").unwrap(),
        Policy::gcra("1/1h", 4).unwrap(),
    ];
    let counts =
        |d: &Decision| (d.allowed, d.limit, d.remaining, d.quotas.iter().map(|q| q.remaining).collect::<Vec<_>>());
    for (n, policy) in policies.iter().enumerate() {
        let (batched, sequential, _) = at_once_and_in_sequence(&server, policy, None, &format!("server{n}")).await;
        for (i, (b, s)) in batched.iter().zip(&sequential).enumerate() {
            assert_eq!(counts(b), counts(s), "{policy}, call {i}");
        }
    }
}
