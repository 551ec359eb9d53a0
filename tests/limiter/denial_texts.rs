//! A denial's text gives its wait in one format whatever its length:
//! seconds, rounded up to the millisecond, with no more decimals than it
//! needs (`3s`, `9.966s`, `0.999s`), never `999ms` next to `9.966s`.
//!
//! `cargo test --test limiter denial_texts::`

use redlimit::{Limiter, ManualClock, Policy, Store};
use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn every_wait_is_written_in_seconds() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let whole = Limiter::new("whole", Policy::fixed_window("1/3s").unwrap(), &store);
    let fraction = Limiter::new("fraction", Policy::sliding_log("1/10s").unwrap(), &store);
    let short = Limiter::new("short", Policy::gcra("1/1s", 0).unwrap(), &store);
    for limiter in [&whole, &fraction, &short] {
        limiter.limit("k", 1).await.unwrap();
    }
    let whole_denied = whole.limit("k", 1).await.unwrap_err();
    clock.advance(Duration::from_millis(34));
    let fraction_denied = fraction.limit("k", 1).await.unwrap_err();
    clock.advance(Duration::from_micros(1));
    let short_denied = short.limit("k", 1).await.unwrap_err();

    assert_eq!(whole_denied.to_string(), "rate limited by `whole` (1/3s exceeded); retry after 3s");
    assert_eq!(fraction_denied.to_string(), "rate limited by `fraction` (1/10s exceeded); retry after 9.966s");
    // Under a second, still in seconds; rounded up, so a client that waits that long passes.
    assert_eq!(short_denied.retry_after(), Some(Duration::from_micros(965_999)));
    assert_eq!(short_denied.to_string(), "rate limited by `short` (gcra 1/1s burst 0); retry after 0.966s");
}
