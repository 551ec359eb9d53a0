//! Every convention of DESIGN.md "Algorithms", for every algorithm it
//! concerns, as functions over any list of stores driven by one manual clock:
//! `limiter/conventions.rs` runs each on memory and a single Redis,
//! `cluster/redis_cluster.rs` on memory and a Redis Cluster.

use redlimit::{Decision, Limiter, ManualClock, Policy, Store};
use std::time::Duration;

/// Labelled stores that all read `clock`.
pub type Stores<'a> = [(&'static str, &'a Store)];

/// One policy per algorithm whose tightest limit is 3 permits.
fn three_permit_policies() -> Vec<Policy> {
    vec![
        Policy::fixed_window("3/1s").unwrap(),
        Policy::sliding_window("3/1s", "100ms").unwrap(),
        Policy::sliding_log("3/1s").unwrap(),
        Policy::token_bucket(3, "3/1s").unwrap(),
        Policy::leaky_bucket(3, "3/1s").unwrap(),
        Policy::gcra("3/1s", 2).unwrap(),
    ]
}

fn limiter(store: &Store, test: &str, policy: &Policy) -> Limiter {
    Limiter::new(format!("{test}-{}", policy.algorithm()), policy.clone(), store)
}

const US: Duration = Duration::from_micros(1);

pub async fn remaining_counts_down_after_each_request(stores: &Stores<'_>, _clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in three_permit_policies() {
            let l = limiter(store, "remaining", &policy);
            let left: Vec<u64> =
                [l.check("k", 1).await.unwrap(), l.check("k", 1).await.unwrap(), l.check("k", 1).await.unwrap()]
                    .iter()
                    .map(|d| d.remaining)
                    .collect();
            assert_eq!(left, vec![2, 1, 0], "{backend} {policy}");
            let denied = l.check("k", 1).await.unwrap();
            assert!(!denied.allowed, "{backend} {policy}");
            assert_eq!((denied.limit, denied.remaining), (3, 0), "{backend} {policy}");
        }
    }
}

pub async fn a_denial_consumes_nothing(stores: &Stores<'_>, _clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in three_permit_policies() {
            let l = limiter(store, "denial", &policy);
            l.check("k", 2).await.unwrap();
            // Cost 2 does not fit in the 1 left: denied, and denied the same way again.
            let first = l.check("k", 2).await.unwrap();
            let second = l.check("k", 2).await.unwrap();
            assert!(!first.allowed, "{backend} {policy}");
            assert_eq!(first, second, "{backend} {policy}: a denial changed the state");
            // The one permit left is still there.
            let one = l.check("k", 1).await.unwrap();
            assert!(one.allowed && one.remaining == 0, "{backend} {policy}: {one:?}");
        }
    }
}

pub async fn retry_after_is_rounded_up_and_obeying_it_succeeds(stores: &Stores<'_>, clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in three_permit_policies() {
            let l = limiter(store, "retry", &policy);
            clock.advance(Duration::from_micros(123_457)); // not aligned to anything
            for _ in 0..3 {
                l.check("k", 1).await.unwrap();
            }
            let denied = l.check("k", 1).await.unwrap();
            let wait = denied.retry_after.unwrap_or_else(|| panic!("{backend} {policy}: no retry_after"));
            clock.advance(wait - US);
            assert!(
                !l.check("k", 1).await.unwrap().allowed,
                "{backend} {policy}: passed 1 µs before retry_after {wait:?}"
            );
            clock.advance(US);
            assert!(l.check("k", 1).await.unwrap().allowed, "{backend} {policy}: obeying retry_after {wait:?} failed");
        }
    }
}

pub async fn a_cost_that_can_never_pass_is_denied_without_retry_after(stores: &Stores<'_>, _clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in three_permit_policies() {
            let l = limiter(store, "never", &policy);
            let d = l.check("k", 4).await.unwrap();
            assert!(!d.allowed && d.retry_after.is_none() && d.can_never_pass(), "{backend} {policy}: {d:?}");
            let huge = l.check("k", u64::MAX).await.unwrap();
            assert!(huge.can_never_pass(), "{backend} {policy}: {huge:?}");
            assert!(l.check("k", 3).await.unwrap().allowed, "{backend} {policy}: the denials took something");
            let message = l.limit("k", 4).await.unwrap_err().to_string();
            assert!(message.contains("can never pass"), "{message}");
        }
    }
}

pub async fn cost_zero_takes_nothing_and_reports_the_state(stores: &Stores<'_>, _clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in three_permit_policies() {
            let l = limiter(store, "zero", &policy);
            let fresh = l.check("k", 0).await.unwrap();
            assert_eq!(
                (fresh.allowed, fresh.remaining, fresh.reset_after),
                (true, 3, Duration::ZERO),
                "{backend} {policy}"
            );
            l.check("k", 2).await.unwrap();
            let state = l.check("k", 0).await.unwrap();
            assert_eq!((state.allowed, state.remaining), (true, 1), "{backend} {policy}");
            assert_eq!(l.check("k", 0).await.unwrap(), state, "{backend} {policy}: cost 0 changed the state");
        }
    }
}

pub async fn peek_gives_the_check_answer_without_taking_it(stores: &Stores<'_>, _clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in three_permit_policies() {
            let l = limiter(store, "peek", &policy);
            let peeked = l.peek("k", 2).await.unwrap();
            let peeked_again = l.peek("k", 2).await.unwrap();
            assert_eq!(peeked, peeked_again, "{backend} {policy}");
            assert_eq!(l.check("k", 2).await.unwrap(), peeked, "{backend} {policy}");
        }
    }
}

pub async fn windows_are_half_open(stores: &Stores<'_>, clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in [
            Policy::fixed_window("1/1s").unwrap(),
            Policy::sliding_log("1/1s").unwrap(),
            Policy::sliding_window("1/1s", "1s").unwrap(),
        ] {
            let l = limiter(store, "half-open", &policy);
            // Align to the sub-window grid so the sliding window's boundary is at +1 s too.
            let now = redlimit::Clock::now_us(clock).unwrap();
            clock.advance(Duration::from_micros(1_000_000 - now % 1_000_000));
            assert!(l.check("k", 1).await.unwrap().allowed);
            clock.advance(Duration::from_secs(1) - US);
            assert!(
                !l.check("k", 1).await.unwrap().allowed,
                "{backend} {policy}: hit no longer counted at s + W - 1µs"
            );
            clock.advance(US);
            assert!(l.check("k", 1).await.unwrap().allowed, "{backend} {policy}: hit still counted at s + W");
        }
    }
}

pub async fn rates_are_exact(stores: &Stores<'_>, clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in [
            Policy::token_bucket(1, "1/3s").unwrap(),
            Policy::leaky_bucket(1, "1/3s").unwrap(),
            Policy::gcra("1/3s", 0).unwrap(),
        ] {
            let l = limiter(store, "exact", &policy);
            assert!(l.check("k", 1).await.unwrap().allowed);
            let denied = l.check("k", 1).await.unwrap();
            assert_eq!(denied.retry_after, Some(Duration::from_secs(3)), "{backend} {policy}");
            assert_eq!(denied.reset_after, Duration::from_secs(3), "{backend} {policy}");
            clock.advance(Duration::from_secs(3) - US);
            assert!(!l.check("k", 1).await.unwrap().allowed, "{backend} {policy}: token arrived early");
            clock.advance(US);
            assert!(l.check("k", 1).await.unwrap().allowed, "{backend} {policy}: token not there at exactly 3 s");
        }
        // Three per second: one every 333 333.3 µs, and the third at exactly 1 s.
        let l = limiter(store, "exact-thirds", &Policy::token_bucket(3, "3/1s").unwrap());
        l.check("k", 3).await.unwrap();
        clock.advance(Duration::from_micros(333_333));
        assert!(!l.check("k", 1).await.unwrap().allowed, "{backend}");
        clock.advance(Duration::from_micros(666_667));
        assert_eq!(l.check("k", 0).await.unwrap().remaining, 3, "{backend}: three tokens at exactly 1 s");
    }
}

pub async fn multi_strategy_is_all_or_nothing_and_names_every_violation(stores: &Stores<'_>, clock: &ManualClock) {
    for &(backend, store) in stores {
        for policy in [
            Policy::fixed_window("2/1s,3/10s,5/1m").unwrap(),
            Policy::sliding_log("2/1s,3/10s,5/1m").unwrap(),
            Policy::sliding_window("2/1s,3/10s,5/1m", "1s").unwrap(),
        ] {
            let l = limiter(store, "multi", &policy);
            let names = |d: &Decision| d.violated.iter().map(ToString::to_string).collect::<Vec<_>>();
            let d: Vec<Decision> = vec![l.check("k", 1).await.unwrap(), l.check("k", 1).await.unwrap()];
            assert_eq!((d[1].limit, d[1].remaining), (2, 0), "{backend} {policy}: least room is the 1 s rule");
            for _ in 0..3 {
                let denied = l.check("k", 1).await.unwrap();
                assert_eq!(names(&denied), vec!["2/1s"], "{backend} {policy}");
            }
            // Had those three denials been recorded by the 10 s rule, it would now deny.
            clock.advance(Duration::from_secs(1));
            assert!(
                l.check("k", 1).await.unwrap().allowed,
                "{backend} {policy}: a denial by the 1 s rule was counted elsewhere"
            );
            let by_ten = l.check("k", 1).await.unwrap();
            assert_eq!(names(&by_ten), vec!["3/10s"], "{backend} {policy}");
            let three = l.check("k", 3).await.unwrap();
            assert_eq!(
                names(&three),
                vec!["2/1s", "3/10s", "5/1m"],
                "{backend} {policy}: every violation, in declared order"
            );
            assert!(three.can_never_pass(), "{backend} {policy}: 3 exceeds the 2/1s rule forever");
            clock.advance(Duration::from_secs(10));
            let after = l.check("k", 1).await.unwrap();
            assert_eq!(
                (after.allowed, after.limit, after.remaining),
                (true, 2, 1),
                "{backend} {policy}: 1 s and 1 min rules both have 1 left; the first declared wins the tie"
            );
        }
    }
}
