//! `#[rate_limit]` on the in-memory store: every decision is counted, a denial still carries the store's answer, no store
//! time is recorded, and a program taking DEBUG events still gets each
//! decision's span. The global store of this binary is `Store::memory()`
//! on a manual clock.

use once_cell::sync::OnceCell;
use redlimit::{rate_limit, ManualClock, RateLimited, Store};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::metrics_capture::{counter, histogram_samples, recorded};
use std::time::Duration;

/// The clock of this binary's global store, set once for every test.
fn clock() -> &'static ManualClock {
    static CLOCK: OnceCell<ManualClock> = OnceCell::new();
    CLOCK.get_or_init(|| {
        let clock = ManualClock::new();
        redlimit::init(Store::memory().with_clock(clock.clone())).unwrap();
        clock
    })
}

#[rate_limit(algo = "gcra", rate = "3/1m", burst = 2, key = "<k>")]
async fn annotated(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn annotated_calls_on_the_memory_store_are_counted_and_their_denials_complete() {
    drop(recorded());
    let clock = clock();
    for _ in 0..3 {
        annotated("user:1").await.unwrap();
    }
    // 3 per minute with a burst of 2: the fourth call may come 20 s later.
    let denied = annotated("user:1").await.unwrap_err();
    assert_eq!((denied.decision().allowed, denied.decision().remaining, denied.decision().limit), (false, 0, 3));
    assert_eq!(denied.decision().retry_after, Some(Duration::from_secs(20)));
    clock.advance(Duration::from_secs(20));
    annotated("user:1").await.unwrap();

    let name = format!("{}::annotated", module_path!());
    let labels = |outcome| [("limiter", name.as_str()), ("algo", "gcra"), ("outcome", outcome)];
    assert_eq!(counter("redlimit_decisions_total", &labels("allowed")), 4);
    assert_eq!(counter("redlimit_decisions_total", &labels("denied")), 1);
    assert!(
        histogram_samples("redlimit_store_duration_seconds", &name).is_empty(),
        "the memory store's time is not a metric"
    );
}

#[rate_limit(algo = "sliding_log", strategies = "2/1h", key = "<k>", name = "traced.annotated")]
async fn traced(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn a_program_taking_debug_events_gets_a_span_for_every_annotated_call() {
    clock();
    // The site's first call builds its limiter; the later ones take the
    // path without a future, which must step aside for the span.
    traced("secret-user-key").await.unwrap();
    let logs = LogCapture::default();
    let _guard = logs.install_debug();
    traced("secret-user-key").await.unwrap();
    traced("secret-user-key").await.unwrap_err();

    let text = logs.text();
    let closes: Vec<&str> =
        text.lines().filter(|l| l.contains("redlimit.decision{") && l.contains(": close")).collect();
    assert_eq!(closes.len(), 2, "{text}");
    for (line, outcome) in closes.iter().zip(["allowed", "denied"]) {
        assert!(line.contains("limiter=\"traced.annotated\"") || line.contains("limiter=traced.annotated"), "{line}");
        assert!(
            line.contains(&format!("outcome=\"{outcome}\"")) || line.contains(&format!("outcome={outcome}")),
            "{line}"
        );
    }
    assert!(!text.contains("secret-user-key"), "a raw key was logged: {text}");
}
