//! A prefetching limiter's map of keys stays bounded.

use crate::{Limiter, ManualClock, Policy, Store};
use std::time::Duration;

#[tokio::test]
async fn many_keys_keep_a_bounded_map_and_keys_holding_permits_stay() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let limiter = Limiter::new("sweep", Policy::gcra("1000/1s", 999).unwrap(), &store).with_prefetch(8).unwrap();
    for _ in 0..2 {
        limiter.check("hot", 1).await.unwrap(); // refills of 1 and 2: one permit held
    }
    for key in 0..super::SWEEP_ABOVE {
        limiter.check(key.to_string(), 1).await.unwrap();
    }
    clock.advance(super::DEFAULT_PREFETCH_TTL + Duration::from_millis(1));
    limiter.check("new", 1).await.unwrap();
    let prefetch = limiter.prefetch.as_deref().unwrap();
    let quotas = prefetch.quotas.lock().unwrap();
    let keys: Vec<_> = quotas.as_ref().unwrap().values().flat_map(|by_key| by_key.keys()).collect();
    assert_eq!(keys.len(), 2, "the idle keys were dropped");
    assert!(keys.iter().any(|key| &***key == b"hot"), "a key holding a permit stays, to give it back");
}
