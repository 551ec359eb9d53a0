//! `#[rate_limit]` on the in-memory store decides through a path of its own
//! (an admitted call makes no `Decision`): every decision is still counted,
//! a denial still carries the store's answer, and no store time is
//! recorded. The global store of this binary is `Store::memory()`.

#[path = "metrics_capture/mod.rs"]
mod metrics_capture;

use metrics_capture::{counter, histogram_samples, recorded};
use ratelimit::{rate_limit, ManualClock, RateLimited, Store};
use std::time::Duration;

#[rate_limit(algo = "gcra", rate = "3/1m", burst = 2, key = "<k>")]
async fn annotated(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn annotated_calls_on_the_memory_store_are_counted_and_their_denials_complete() {
    drop(recorded());
    let clock = ManualClock::new();
    ratelimit::init(Store::memory().with_clock(clock.clone())).unwrap();
    for _ in 0..3 {
        annotated("user:1").await.unwrap();
    }
    // 3 per minute with a burst of 2: the fourth call may come 20 s later.
    let denied = annotated("user:1").await.unwrap_err();
    assert_eq!((denied.decision.allowed, denied.decision.remaining, denied.decision.limit), (false, 0, 3));
    assert_eq!(denied.decision.retry_after, Some(Duration::from_secs(20)));
    clock.advance(Duration::from_secs(20));
    annotated("user:1").await.unwrap();

    let name = format!("{}::annotated", module_path!());
    let labels = |outcome| [("limiter", name.as_str()), ("algo", "gcra"), ("outcome", outcome)];
    assert_eq!(counter("ratelimit_decisions_total", &labels("allowed")), 4);
    assert_eq!(counter("ratelimit_decisions_total", &labels("denied")), 1);
    assert!(histogram_samples("ratelimit_store_duration_seconds", &name).is_empty(), "the memory store's time is not a metric");
}
