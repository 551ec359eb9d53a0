//! The memory store's concurrency state, kept by id and by lease end, gives
//! the script's answers where a scan of every permit was never asked to:
//! hundreds of permits on one key, an id acquired again while held, calls
//! judged at an earlier time than one already made (a client clock), and
//! the limit and lease changing between calls on the key. Seeded random
//! sequences, replayed on both stores and compared field by field.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::__private::{Answer, Backend, Binding, Bound, Call, CallKind, MemoryBackend, PermitId, RedisBackend};
use redlimit::{Clock, Decision, ManualClock, Policy, RedisOptions};
use redlimit_test_support::redis_server::RedisServer;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
enum Step {
    /// A permit's call (or a peek, `permit: None`) under policy `policy`.
    Call {
        policy: usize,
        kind: u8,
        permit: u16,
        cost: u64,
    },
    /// The clock moves forward, or back (a late call), by µs.
    Forward(u64),
    Back(u64),
}

fn id(permit: u16) -> PermitId {
    let mut id = [7; 16];
    id[..2].copy_from_slice(&permit.to_le_bytes());
    PermitId(id)
}

async fn ask(bound: &dyn Bound, clock: &ManualClock, cost: u64, kind: CallKind) -> Decision {
    match bound.decide(Call { key: b"k", cost, kind }, clock) {
        Answer::Now(outcome) => outcome,
        Answer::Later(answer) => answer.await,
    }
    .unwrap_or_else(|e| panic!("{kind:?} of {cost} failed: {e}"))
}

async fn replay(backend: &dyn Backend, name: &str, policies: &[Policy], steps: &[Step]) -> Vec<Decision> {
    let clock = ManualClock::starting_at(1_767_225_600_000_000);
    let bound: Vec<Arc<dyn Bound>> = policies
        .iter()
        .map(|policy| backend.bind(Binding { prefix: "parity", name, policy, server_clock: false }))
        .collect();
    let mut outcomes = Vec::new();
    for step in steps {
        match *step {
            Step::Forward(us) => clock.advance(Duration::from_micros(us)),
            Step::Back(us) => clock.set_us(clock.now_us().unwrap() - us),
            Step::Call { policy, kind, permit, cost } => {
                let kind = match kind {
                    0 => CallKind::Acquire(id(permit)),
                    1 => CallKind::Release(id(permit)),
                    2 => CallKind::Renew(id(permit)),
                    _ => CallKind::Peek,
                };
                outcomes.push(ask(&*bound[policy], &clock, cost, kind).await);
            }
        }
    }
    outcomes
}

#[tokio::test]
async fn many_permits_repeated_ids_late_calls_and_changed_leases_agree_on_both_stores() {
    let server = RedisServer::start();
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    let redis = RedisBackend::connect(&server.url(), patient).await.unwrap();
    let memory = MemoryBackend::new();
    let mut rng = SmallRng::seed_from_u64(91);
    for round in 0..6 {
        let limit = rng.random_range(50..400);
        let policies = [
            Policy::concurrency(limit, "2s").unwrap(),
            Policy::concurrency(limit / 2, "700ms").unwrap(),
            Policy::concurrency(limit + 30, "5s").unwrap(),
        ];
        let ids = rng.random_range(100..600);
        let steps: Vec<Step> = (0..1_500)
            .map(|_| match rng.random_range(0..20) {
                0 => Step::Forward(rng.random_range(0..900_000)),
                1 => Step::Back(rng.random_range(0..300_000)),
                n => Step::Call {
                    policy: usize::from(n == 2) + 2 * usize::from(n == 3),
                    kind: [0, 0, 0, 0, 1, 1, 2, 2, 2, 3][rng.random_range(0..10)],
                    permit: rng.random_range(0..ids),
                    cost: rng.random_range(0..4),
                },
            })
            .collect();
        let name = format!("many-{round}");
        let (on_memory, on_redis) =
            (replay(&memory, &name, &policies, &steps).await, replay(&redis, &name, &policies, &steps).await);
        for (i, (m, r)) in on_memory.iter().zip(&on_redis).enumerate() {
            assert_eq!(m, r, "round {round}: answer {i} differs (memory, redis)");
        }
        assert!(on_memory.iter().filter(|o| o.remaining == 0).count() > 10, "round {round}: the limit was reached");
    }
}
