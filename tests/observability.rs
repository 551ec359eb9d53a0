#![cfg(feature = "redis")]
//! Every decision is a DEBUG span and a count in the
//! `metrics` facade, store failures are WARN events and counted by kind, and
//! no key ever reaches a log line or a label.

use redlimit::{rate_limit, Limiter, ManualClock, OnError, Policy, RateLimited, RedisOptions, Store};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::metrics_capture::{counter, histogram_samples, recorded};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn decisions_are_counted_by_limiter_algo_and_outcome_on_both_stores() {
    drop(recorded());
    let stores = BothStores::start().await;
    for (backend, store) in stores.each() {
        let name = format!("metrics.{backend}");
        let limiter = Limiter::new(name.as_str(), Policy::fixed_window("3/1m").unwrap(), store);
        for _ in 0..5 {
            limiter.check("user:1", 1).await.unwrap();
        }
        limiter.peek("user:1", 1).await.unwrap(); // a peek is not a decision
        let denied = limiter.limit("user:1", 1).await.unwrap_err(); // answered by the deny cache: still counted
        assert!(!denied.decision().allowed);

        let labels = |outcome| [("limiter", name.as_str()), ("algo", "fixed_window"), ("outcome", outcome)];
        assert_eq!(counter("redlimit_decisions_total", &labels("allowed")), 3, "{backend}");
        assert_eq!(counter("redlimit_decisions_total", &labels("denied")), 3, "{backend}");

        // Only the remote store's answer time is recorded: five calls reached Redis
        // (three admitted, the first denial, the peek, the cache answered the rest).
        let samples = histogram_samples("redlimit_store_duration_seconds", &name);
        let expected = if backend == "redis" { 5 } else { 0 };
        assert_eq!(samples.len(), expected, "{backend}: {samples:?}");
        assert!(samples.iter().all(|s| *s > 0.0 && *s < 10.0), "{samples:?}");
    }
}

#[rate_limit(algo = "fixed_window", strategies = "3/1m,100/1h", key = "<k>")]
async fn annotated(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

/// `#[rate_limit]` decides through a path of its own (an admitted call
/// builds no `Decision`): it counts, times the store and remembers denials
/// as `Limiter::check` does. The only test in this binary with a global store.
#[tokio::test(flavor = "current_thread")]
async fn annotated_calls_are_counted_timed_and_their_denials_remembered() {
    drop(recorded());
    let server = RedisServer::start();
    redlimit::init(Store::redis(&server.url()).await.unwrap()).unwrap();
    for _ in 0..3 {
        annotated("user:1").await.unwrap();
    }
    assert!(annotated("user:1").await.is_err());
    let asked = server.evalsha_calls().await;
    for _ in 0..2 {
        assert!(annotated("user:1").await.is_err());
    }
    assert_eq!(server.evalsha_calls().await, asked, "remembered denials are answered in process");

    let name = format!("{}::annotated", module_path!());
    let labels = |outcome| [("limiter", name.as_str()), ("algo", "fixed_window"), ("outcome", outcome)];
    assert_eq!(counter("redlimit_decisions_total", &labels("allowed")), 3);
    assert_eq!(counter("redlimit_decisions_total", &labels("denied")), 3);
    // Four calls reached Redis: the three admitted and the first denial.
    assert_eq!(histogram_samples("redlimit_store_duration_seconds", &name).len(), 4);
}

#[tokio::test(flavor = "current_thread")]
async fn store_errors_are_counted_by_kind_and_warned_with_the_verdict() {
    drop(recorded());
    let logs = LogCapture::default();
    let _guard = logs.install();

    let mut server = RedisServer::start();
    let options = RedisOptions::default().with_response_timeout(Duration::from_millis(100));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    // Three limiters (not clones, which share one outage log): each says its first failure.
    let limiter = || Limiter::new("metrics.outage", Policy::gcra("1/1s", 0).unwrap(), &store);
    let allow = limiter();
    let deny = limiter().with_on_error(OnError::Deny);
    let local = limiter().with_on_error(OnError::Local);
    server.kill();

    let before = counter("redlimit_store_errors_total", &[]);
    assert!(allow.limit("secret-user-key", 1).await.is_ok());
    assert_eq!(deny.limit("secret-user-key", 1).await.unwrap_err().reason(), redlimit::DenialReason::StoreUnavailable);
    assert!(local.limit("secret-user-key", 1).await.is_ok(), "the in-memory limiter admits the first call");
    assert!(local.limit("secret-user-key", 1).await.is_err(), "and denies the second, 1/1s");
    assert!(allow.check("secret-user-key", 1).await.is_err(), "check reports the failure itself");
    assert_eq!(counter("redlimit_store_errors_total", &[]) - before, 5);
    let by_kind: u64 = ["connection", "unavailable", "timeout"]
        .into_iter()
        .map(|kind| counter("redlimit_store_errors_total", &[("kind", kind)]))
        .sum();
    assert_eq!(by_kind - before, 5, "a killed server is a connection failure, then the breaker's fast failures");

    // on_error decisions count as decisions; check's bare failure does not.
    let labels = |outcome| [("limiter", "metrics.outage"), ("outcome", outcome)];
    assert_eq!(counter("redlimit_decisions_total", &labels("allowed")), 2);
    assert_eq!(counter("redlimit_decisions_total", &labels("denied")), 2);

    let text = logs.text();
    assert!(text.contains("call allowed (on_error = allow)"), "{text}");
    assert!(text.contains("call denied (on_error = deny)"), "{text}");
    assert!(text.contains("call allowed by the in-memory limiter (on_error = local)"), "{text}");
    assert_eq!(text.matches(" WARN ").count(), 3, "one WARN per limiter's first failure, none for check: {text}");
    assert!(!text.contains("secret-user-key"), "a raw key was logged: {text}");
}

#[tokio::test(flavor = "current_thread")]
async fn every_decision_is_a_debug_span_with_its_outcome_and_never_the_key() {
    let logs = LogCapture::default();
    let _guard = logs.install_debug();
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("traced", Policy::sliding_log("2/1m").unwrap(), &store);
    for _ in 0..3 {
        limiter.check("secret-user-key", 1).await.unwrap();
    }

    let text = logs.text();
    let closes: Vec<&str> =
        text.lines().filter(|l| l.contains("redlimit.decision{") && l.contains(": close")).collect();
    assert_eq!(closes.len(), 3, "{text}");
    for (line, (outcome, remaining)) in closes.iter().zip([("allowed", 1), ("allowed", 0), ("denied", 0)]) {
        assert!(line.contains("DEBUG"), "{line}");
        assert!(line.contains("limiter=\"traced\"") || line.contains("limiter=traced"), "{line}");
        assert!(line.contains("algo=\"sliding_log\"") || line.contains("algo=sliding_log"), "{line}");
        assert!(
            line.contains(&format!("outcome=\"{outcome}\"")) || line.contains(&format!("outcome={outcome}")),
            "{line}"
        );
        assert!(line.contains(&format!("remaining={remaining}")), "{line}");
    }
    assert!(!text.contains("secret-user-key"), "a raw key was logged: {text}");

    // In dry run (a trial, counted apart), a would-be denial is named so, as the metrics count it.
    let trial = limiter.with_dry_run(true);
    for _ in 0..3 {
        trial.limit("secret-user-key", 1).await.unwrap();
    }
    let text = logs.text();
    let closes: Vec<&str> =
        text.lines().filter(|l| l.contains("redlimit.decision{") && l.contains(": close")).collect();
    assert_eq!(closes.len(), 6, "{text}");
    let last = closes[5];
    assert!(last.contains("outcome=\"dry_run_denied\"") || last.contains("outcome=dry_run_denied"), "{last}");
}
