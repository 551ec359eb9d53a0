//! A prefetching limiter's map of keys stays bounded.

use crate::clock::ManualClock;
use crate::policy::Policy;
use crate::store::Store;
use crate::Limiter;
use std::time::Duration;

#[tokio::test]
async fn many_keys_keep_a_bounded_map_and_expired_permits_are_given_back() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let limiter = Limiter::new("sweep", Policy::gcra("1/1m", 999).unwrap(), &store).with_prefetch(8).unwrap();
    for _ in 0..2 {
        limiter.check("hot", 1).await.unwrap(); // refills of 1 and 2: one permit held
    }
    for key in 0..super::SWEEP_ABOVE {
        limiter.check(key.to_string(), 1).await.unwrap();
    }
    let prefetch = limiter.prefetch.clone().unwrap();
    assert_eq!(prefetch.records(), super::SWEEP_ABOVE + 1, "nothing idle yet: every key refilled just now");
    clock.advance(super::DEFAULT_PREFETCH_TTL + Duration::from_millis(1));
    limiter.check("new", 1).await.unwrap();
    assert_eq!(prefetch.records(), 1, "the idle keys were dropped, the hot key's expired permit with them");
    tokio::task::yield_now().await; // the give-back runs on a task of its own
    assert_eq!(limiter.prefetch_stats().returned, 1, "the hot key's permit was given back");
    assert_eq!(limiter.peek("hot", 0).await.unwrap().remaining, 999 + 1 - 2, "the store has it back");
}

#[tokio::test]
async fn records_stay_bounded_across_per_call_policies_and_idle_ones_are_dropped() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let limiter =
        Limiter::new("per-user", Policy::token_bucket(100, "10/1s").unwrap(), &store).with_prefetch(8).unwrap();
    let prefetch = limiter.prefetch.clone().unwrap();
    // Each user with a policy of their own, as a quota read from a database would be.
    let users = 3 * super::MAX_RECORDS;
    for user in 0..users {
        let own = Policy::token_bucket(100 + user as u64, "10/1s").unwrap();
        assert!(limiter.with_policy(&own).check(user.to_string(), 1).await.unwrap().allowed);
        assert!(prefetch.records() <= super::MAX_RECORDS, "user {user}: {} records", prefetch.records());
    }
    clock.advance(super::DEFAULT_PREFETCH_TTL + Duration::from_millis(1));
    limiter.check("late", 1).await.unwrap();
    assert_eq!(prefetch.records(), 1, "every idle record was dropped; the new key's stays");
}
