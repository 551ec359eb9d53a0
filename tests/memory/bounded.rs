//! The memory backend drops keys once their state is back to untouched, so a
//! flood of distinct keys does not grow memory for good.

use redlimit::__private::MemoryBackend;
use redlimit::{Clock, Limiter, ManualClock, Policy, Store};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn a_million_distinct_keys_are_dropped_after_their_windows_pass() {
    let memory = Arc::new(MemoryBackend::new());
    let clock = ManualClock::new();
    let store = Store::from_backend(memory.clone()).with_clock(clock.clone());
    let limiter = Limiter::new("flood", Policy::fixed_window("5/1s").unwrap(), &store);
    for i in 0..1_000_000u32 {
        assert!(limiter.check(i.to_le_bytes(), 1).await.unwrap().allowed);
    }
    assert_eq!(memory.len(), 1_000_000);

    // Once the windows have passed (plus the 60 s kept for a client clock,
    // which the manual clock is), normal traffic sweeps every shard: only the
    // keys of that new traffic remain.
    clock.advance(Duration::from_secs(61));
    let other = Limiter::new("other", Policy::token_bucket(5, "1/1s").unwrap(), &store);
    for i in 0..10_000u32 {
        other.check(i.to_le_bytes(), 1).await.unwrap();
    }
    assert_eq!(memory.len(), 10_000);

    clock.advance(Duration::from_secs(61));
    memory.purge_expired(clock.now_us().unwrap());
    assert!(memory.is_empty());
}

#[tokio::test]
async fn a_key_is_dropped_exactly_when_it_is_untouched_again_plus_the_client_clock_slack() {
    let memory = Arc::new(MemoryBackend::new());
    let clock = ManualClock::new();
    let store = Store::from_backend(memory.clone()).with_clock(clock.clone());
    let limiter = Limiter::new("exact-drop", Policy::token_bucket(2, "1/1s").unwrap(), &store);
    let d = limiter.check("k", 2).await.unwrap();
    assert_eq!(d.reset_after, Duration::from_secs(2));
    let kept = Duration::from_secs(2 + 60);
    clock.advance(kept - Duration::from_micros(1));
    memory.purge_expired(clock.now_us().unwrap());
    assert_eq!(memory.len(), 1, "dropped before the bucket was full again");
    clock.advance(Duration::from_micros(1));
    memory.purge_expired(clock.now_us().unwrap());
    assert_eq!(memory.len(), 0);
}
