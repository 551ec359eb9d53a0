//! The memory store gives a burst's memory back once its keys expired, with
//! no call to sweep them: a background thread drops keys timed by the
//! store's own clock, and shrinks what held them.
//!
//! One test in its own binary: it reads this process's resident memory.

use redlimit::__private::MemoryBackend;
use redlimit::{Limiter, Policy, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 1_000_000;

/// Resident memory of this process, in bytes (`/proc/self/statm`, Linux).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[tokio::test]
async fn a_million_expired_keys_are_dropped_untouched_and_memory_falls() {
    let memory = Arc::new(MemoryBackend::new());
    let store = Store::from_backend(memory.clone());
    let limiter = Limiter::new("burst", Policy::fixed_window("1/20s").unwrap(), &store);
    let before = resident_bytes();
    for i in 0..KEYS {
        assert!(limiter.check(i.to_le_bytes(), 1).await.unwrap().allowed);
    }
    let peak = resident_bytes();
    let held = memory.len();
    // Every key is untouched again 20 s after its call; the sweeper runs once
    // a second. The deadline is far beyond both, only so a defect fails.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !memory.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(memory.len(), 0, "keys still held long after they expired");
    let after = resident_bytes();
    println!("resident: {before} before, {peak} after {KEYS} keys ({held} held), {after} once they expired");
    assert!(peak > before, "the burst took no memory?");
    assert!(
        after < peak - (peak - before) / 2,
        "less than half the burst's memory was given back: {before} -> {peak} -> {after}"
    );
}
