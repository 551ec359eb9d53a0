//! The concurrency algorithm's two stores give the same answers: tables of
//! acquire, release, renew and peek sequences on one manual clock, and
//! random ones, replayed on the memory store and on a real Redis, compared
//! field by field; and the edges a lease must keep (never renewed once
//! ended, never released twice).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::__private::{
    Answer, Backend, Binding, Bound, Call, CallKind, MemoryBackend, PermitId, RedisBackend, Refunded,
};
use redlimit::{Clock, Decision, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::stores::BothStores;
use std::sync::Arc;
use std::time::Duration;

/// One step of a table: what happens at which time (ms from the start).
#[derive(Debug, Clone, Copy)]
enum Step {
    Acquire { permit: u8, cost: u64 },
    Release { permit: u8, cost: u64 },
    Renew { permit: u8, cost: u64 },
    Peek { cost: u64 },
    Advance { ms: u64 },
}

use Step::*;

fn id(permit: u8) -> PermitId {
    PermitId([permit; 16])
}

async fn ask(bound: &dyn Bound, clock: &dyn redlimit::Clock, key: &[u8], cost: u64, kind: CallKind) -> Decision {
    match bound.decide(Call { key, cost, kind }, clock) {
        Answer::Now(outcome) => outcome,
        Answer::Later(answer) => answer.await,
    }
    .unwrap_or_else(|e| panic!("{kind:?} of {cost} failed: {e}"))
}

/// The memory store and the private Redis, as backends that bind limiters.
async fn backends(stores: &BothStores) -> [Arc<dyn Backend>; 2] {
    let redis = RedisBackend::connect(&stores.server.url(), RedisOptions::default()).await.unwrap();
    [Arc::new(MemoryBackend::new()), Arc::new(redis)]
}

fn bind(backend: &dyn Backend, name: &str, policy: &Policy) -> Arc<dyn Bound> {
    backend.bind(Binding { prefix: "redlimit", name, policy, server_clock: false })
}

/// Replays `steps` on both stores under a limiter named `name`, and
/// returns each store's outcomes after checking they are equal.
async fn replay(stores: &BothStores, name: &str, policy: &Policy, steps: &[Step]) -> Vec<Decision> {
    let start = stores.clock.now_us().unwrap();
    let mut answers: Vec<Vec<Decision>> = Vec::new();
    for backend in backends(stores).await {
        stores.clock.set_us(start);
        let bound = bind(&*backend, name, policy);
        let mut outcomes = Vec::new();
        for step in steps {
            let (cost, kind) = match *step {
                Acquire { permit, cost } => (cost, CallKind::Acquire(id(permit))),
                Release { permit, cost } => (cost, CallKind::Release(id(permit))),
                Renew { permit, cost } => (cost, CallKind::Renew(id(permit))),
                Peek { cost } => (cost, CallKind::Peek),
                Advance { ms } => {
                    stores.clock.advance(Duration::from_millis(ms));
                    continue;
                }
            };
            outcomes.push(ask(&*bound, &stores.clock, b"k", cost, kind).await);
        }
        answers.push(outcomes);
    }
    let redis = answers.pop().unwrap();
    let memory = answers.pop().unwrap();
    for (i, (m, r)) in memory.iter().zip(&redis).enumerate() {
        assert_eq!(m, r, "{name}: answer {i} differs (memory, redis) in {steps:?}");
    }
    memory
}

fn summary(outcomes: &[Decision]) -> Vec<(bool, u64, u64)> {
    outcomes.iter().map(|o| (o.allowed, o.remaining, o.reset_after.as_micros() as u64)).collect()
}

#[tokio::test]
async fn tables_of_acquire_release_renew_and_expiry_agree_on_both_stores() {
    let stores = BothStores::start().await;
    let policy = Policy::concurrency(3, "1s").unwrap();
    let table = [
        Acquire { permit: 1, cost: 1 },
        Acquire { permit: 2, cost: 2 },
        Acquire { permit: 3, cost: 1 },
        Peek { cost: 1 },
        Advance { ms: 400 },
        Release { permit: 1, cost: 1 },
        Release { permit: 1, cost: 1 },
        Acquire { permit: 4, cost: 1 },
        Advance { ms: 300 },
        Renew { permit: 2, cost: 2 },
        Advance { ms: 500 },
        Peek { cost: 1 },
        Acquire { permit: 5, cost: 2 },
        Renew { permit: 4, cost: 1 },
        Advance { ms: 1_000 },
        Peek { cost: 3 },
        Renew { permit: 2, cost: 2 },
        Acquire { permit: 6, cost: 4 },
        Acquire { permit: 7, cost: 0 },
    ];
    let outcomes = replay(&stores, "table", &policy, &table).await;
    assert_eq!(
        summary(&outcomes),
        vec![
            (true, 2, 1_000_000),
            (true, 0, 1_000_000),
            (false, 0, 1_000_000),
            (false, 0, 1_000_000),
            (true, 1, 600_000),
            (true, 1, 600_000),
            (true, 0, 1_000_000),
            (true, 0, 1_000_000),
            // At 1.2 s: permit 4 (taken at 0.4 s) ended at 1.4 s, so it still counts.
            (false, 0, 500_000),
            (false, 0, 500_000),
            (true, 0, 1_000_000),
            // At 2.2 s every lease has ended.
            (true, 0, 0),
            (false, 3, 0),
            (false, 3, 0),
            (true, 3, 0),
        ],
        "{outcomes:#?}"
    );
}

#[tokio::test]
async fn random_sequences_agree_on_both_stores() {
    let stores = BothStores::start().await;
    let mut rng = SmallRng::seed_from_u64(28);
    for round in 0..40 {
        let limit = rng.random_range(1..6);
        let policy = Policy::concurrency(limit, &format!("{}ms", rng.random_range(100..2_000))).unwrap();
        // Every acquisition names a new permit, as `PermitId::unique` does;
        // releases and renewals name any, taken or not, ended or not.
        let mut taken = 0;
        let steps: Vec<Step> = (0..60)
            .map(|_| {
                let (permit, cost) = (rng.random_range(0..=taken), rng.random_range(0..3));
                match rng.random_range(0..10) {
                    0..=3 => {
                        taken += 1;
                        Acquire { permit: taken, cost }
                    }
                    4 | 5 => Release { permit, cost },
                    6 => Renew { permit, cost },
                    7 => Peek { cost },
                    _ => Advance { ms: rng.random_range(0..700) },
                }
            })
            .collect();
        replay(&stores, &format!("random-{round}"), &policy, &steps).await;
    }
}

#[tokio::test]
async fn a_peek_holds_nothing_and_a_rate_policy_refuses_a_permit() {
    let stores = BothStores::start().await;
    for (name, store) in stores.each() {
        let limiter = Limiter::new("checks", Policy::concurrency(1, "30s").unwrap(), store);
        for _ in 0..3 {
            let decision = limiter.peek("k", 1).await.unwrap();
            assert_eq!((decision.allowed, decision.remaining), (true, 0), "{name}: as if taken, held by none");
        }
        let held = limiter.acquire("k").await.unwrap();
        assert!(!limiter.peek("k", 1).await.unwrap().allowed, "{name}");
        drop(held);

        let rate = Limiter::new("rate", Policy::gcra("1/1s", 0).unwrap(), store);
        let permit = rate.acquire("k").await.expect("a rate policy's acquire takes as limit does");
        assert!(!permit.is_held(), "{name}: a rate policy's permit is spent");
        assert!(rate.acquire("k").await.is_err(), "{name}: and it was taken");
    }
}

#[tokio::test]
async fn a_permit_call_under_a_rate_policy_and_a_refund_under_concurrency_are_refused() {
    let stores = BothStores::start().await;
    for backend in backends(&stores).await {
        let rate = bind(&*backend, "rate", &Policy::gcra("1/1s", 0).unwrap());
        let held = bind(&*backend, "held", &Policy::concurrency(1, "1s").unwrap());
        for (bound, kind) in [
            (&rate, CallKind::Acquire(id(1))),
            (&rate, CallKind::Renew(id(1))),
            (&held, CallKind::Refund(Refunded { taken_us: 0, window_end_us: 0 })),
        ] {
            let refused = match bound.decide(Call { key: b"k", cost: 1, kind }, &stores.clock) {
                Answer::Now(answer) => answer,
                Answer::Later(answer) => answer.await,
            };
            assert!(
                matches!(refused, Err(redlimit::Error::InvalidConfig(_))),
                "{} {kind:?}: {refused:?}",
                backend.kind()
            );
        }
    }
}

#[tokio::test]
async fn a_key_leaves_redis_when_its_last_permit_is_given_back() {
    let stores = BothStores::start().await;
    let limiter = Limiter::new("tidy", Policy::concurrency(2, "30s").unwrap(), &stores.redis);
    let (one, two) = (limiter.acquire("k").await.unwrap(), limiter.acquire("k").await.unwrap());
    let mut admin = redis::Client::open(stores.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut admin).await.unwrap();
    assert_eq!(keys, ["redlimit:concurrency/v1:4:tidy:k"]);
    let ttl: i64 = redis::cmd("PTTL").arg(&keys[0]).query_async(&mut admin).await.unwrap();
    assert!(ttl > 30_000 && ttl <= 90_000, "the last lease and the client clock's slack: {ttl}");
    one.release().await.unwrap();
    two.release().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut admin).await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[test]
fn a_concurrency_policy_is_checked_like_every_other() {
    assert!(Policy::concurrency(0, "30s").unwrap_err().to_string().contains("a limit of 0 would deny every call"));
    assert!(Policy::concurrency(1, "0s").is_err());
    assert!(Policy::concurrency(1, "2d").unwrap_err().to_string().contains("too long"));
    let policy = Policy::concurrency(5, "10s").unwrap();
    assert_eq!((policy.max_cost(), policy.lease()), (5, Some(Duration::from_secs(10))));
    assert_eq!(policy.to_string(), "concurrency limit 5 lease 10s");
    let _ = Store::memory();
}

#[test]
fn a_policies_file_declares_a_concurrency_policy() {
    use redlimit::policies::PolicySet;
    let set = PolicySet::parse(
        "p.toml",
        "[policies.exports]\nalgo = \"concurrency\"\nlimit = 3\nlease = \"5s\"\n\n\
         [policies.jobs]\nalgo = \"concurrency\"\nlimit = 8\n",
    )
    .unwrap();
    assert_eq!(set.get("exports").unwrap(), &Policy::concurrency(3, "5s").unwrap());
    assert_eq!(set.get("jobs").unwrap().lease(), Some(Duration::from_secs(30)), "the default lease");
    let missing = PolicySet::parse("p.toml", "[policies.x]\nalgo = \"concurrency\"\nlease = \"5s\"\n").unwrap_err();
    assert!(missing.to_string().contains("`concurrency` needs `limit`: add e.g. `limit = 10`"), "{missing}");
    let zero = PolicySet::parse("p.toml", "[policies.x]\nalgo = \"concurrency\"\nlimit = 0\n").unwrap_err();
    assert!(zero.to_string().contains("limit"), "{zero}");
}
