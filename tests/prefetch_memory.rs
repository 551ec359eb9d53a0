//! Prefetch's memory stays bounded when every user has a policy of their
//! own (`Limiter::with_policy` per call, as with quotas read from a
//! database): its records number at most 4,096 per limiter, and once idle
//! they are dropped. Bytes are counted on the test's own thread, so the
//! harness does not count; the same calls without prefetch are the baseline
//! (the store's own state for each key is in both).

use redlimit::{Limiter, ManualClock, Policy, Store, DEFAULT_PREFETCH_TTL};
use std::time::Duration;

const USERS: u64 = 100_000;

/// Bytes still allocated after `USERS` users each made a call under a
/// policy of their own, and after a new key's call once they are idle.
fn held(prefetch: bool) -> (i64, i64) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let limiter = Limiter::new("per-user", Policy::token_bucket(100, "10/1s").unwrap(), &store);
    let limiter = if prefetch { limiter.with_prefetch(8).unwrap() } else { limiter };
    // The limiter's first call makes what every later call shares.
    runtime.block_on(limiter.check("warm", 1)).unwrap();
    let busy = allocation_counter::measure(|| {
        runtime.block_on(async {
            for user in 0..USERS {
                let own = Policy::token_bucket(100 + user, "10/1s").unwrap();
                assert!(limiter.with_policy(&own).check(user.to_le_bytes(), 1).await.unwrap().allowed);
            }
        })
    });
    clock.advance(DEFAULT_PREFETCH_TTL + Duration::from_millis(1));
    let idle = allocation_counter::measure(|| {
        assert!(runtime.block_on(limiter.check("late", 1)).unwrap().allowed);
    });
    (busy.bytes_current, busy.bytes_current + idle.bytes_current)
}

#[test]
fn users_with_policies_of_their_own_keep_prefetch_memory_bounded_and_idle_records_are_dropped() {
    let (plain_busy, plain_idle) = held(false);
    let (busy, idle) = held(true);
    let (busy, idle) = (busy - plain_busy, idle - plain_idle);
    println!("prefetch holds {busy} bytes more for {USERS} users, {idle} once idle");
    // 4,096 records of about a kilobyte each (the key, its quota, the policy it was taken under).
    assert!(busy < 8 << 20, "{busy} bytes held for {USERS} users' records");
    assert!(idle < 64 << 10, "{idle} bytes still held once every record is idle");
}
