//! A decision on the memory store allocates nothing once its key is known:
//! neither `Limiter::check` nor a `#[rate_limit]` function, for every rate
//! algorithm. Allocations are counted on the test's own thread only, so the
//! store's sweeper and the test harness do not count.

use redlimit::{rate_limit, Limiter, ManualClock, Policy, RateLimited, Store};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Allocations made on this thread while `calls` runs.
fn allocations_during(calls: impl FnOnce()) -> u64 {
    allocation_counter::measure(calls).count_total
}

/// `call`'s answer from its first poll, outside any runtime (which would
/// allocate of its own, and whose cooperative budget would run out): a
/// decision on the memory store needs no second.
fn first_poll<F: Future>(call: F) -> F::Output {
    match pin!(call).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(answer) => answer,
        Poll::Pending => panic!("a call on the memory store decides in its first poll"),
    }
}

const KEYS: u64 = 1_000;

#[test]
fn a_check_on_a_known_key_allocates_nothing_for_any_rate_algorithm() {
    let policies = [
        Policy::fixed_window("1000000/1s").unwrap(),
        Policy::sliding_window("1000000/1s", "100ms").unwrap(),
        Policy::sliding_log("1000000/1s").unwrap(),
        Policy::token_bucket(1_000_000, "1000000/1s").unwrap(),
        Policy::leaky_bucket(1_000_000, "1000000/1s").unwrap(),
        Policy::gcra("1000000/1s", 999_999).unwrap(),
    ];
    for policy in policies {
        let algorithm = policy.algorithm();
        // A time that stands still: every later call lands in the windows,
        // sub-window and log entry the first one made.
        let store = Store::memory().with_clock(ManualClock::new());
        let limiter = Limiter::new("allocations", policy, &store);
        for user in 0..KEYS {
            assert!(first_poll(limiter.check(user.to_le_bytes(), 1)).unwrap().allowed);
        }
        let made = allocations_during(|| {
            for round in 0..10 {
                for user in 0..KEYS {
                    let decision = first_poll(limiter.check(user.to_le_bytes(), 1)).unwrap();
                    assert_eq!((decision.allowed, decision.remaining), (true, 1_000_000 - 2 - round), "{algorithm}");
                }
            }
        });
        assert_eq!(made, 0, "{algorithm}: allocations in {} checks of known keys", 10 * KEYS);
    }
}

#[rate_limit(algo = "gcra", key = "user:<user>", rate = "1000000/1s", burst = 999_999)]
async fn by_gcra(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", key = "user:<user>", strategies = "1000000/1s")]
async fn by_window(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn an_annotated_call_on_a_known_key_allocates_nothing() {
    redlimit::init(Store::memory()).unwrap();
    for user in 0..KEYS {
        first_poll(by_gcra(user)).unwrap();
        first_poll(by_window(user)).unwrap();
    }
    let made = allocations_during(|| {
        for _ in 0..10 {
            for user in 0..KEYS {
                first_poll(by_gcra(user)).unwrap();
                first_poll(by_window(user)).unwrap();
            }
        }
    });
    assert_eq!(made, 0, "allocations in {} annotated calls of known keys", 20 * KEYS);
}
