//! The problem+json bodies (RFC 9457) of denials: a 429 is the draft's
//! `quota-exceeded` type naming the violated policies, its `detail` and
//! `retry_after` agree with `Retry-After`, no body names a key or a module
//! path, and a 503 says the limiter could not decide.

use axum::response::IntoResponse;
use redlimit::http::{PolicyItem, QUOTA_EXCEEDED};
use redlimit::{rate_limit, Limiter, ManualClock, Policy, RateLimited, Store};
use redlimit_test_support::http::{body, header};
use std::sync::Once;
use std::time::Duration;

/// The `RateLimit-Policy` item names of `policy`, as JSON strings.
fn item_names(policy: &Policy, indices: &[usize]) -> String {
    let items = PolicyItem::of(policy);
    let names: Vec<String> = indices.iter().map(|&i| format!(r#""{}""#, items[i].name)).collect();
    format!("[{}]", names.join(","))
}

#[tokio::test]
async fn the_detail_and_retry_after_member_say_the_whole_seconds_retry_after_says() {
    // (time since the admitted call in ms, the wait rounded up to whole seconds)
    let table = [(0, 10), (75, 10), (999, 10), (1_000, 9), (8_500, 2), (9_999, 1)];
    for (elapsed, secs) in table {
        let clock = ManualClock::new();
        let store = Store::memory().with_clock(clock.clone());
        let limiter = Limiter::new("login", Policy::sliding_log("1/10s").unwrap(), &store);
        limiter.limit("203.0.113.9", 1).await.unwrap();
        clock.advance(Duration::from_millis(elapsed));
        let response = limiter.limit("203.0.113.9", 1).await.unwrap_err().into_response();

        assert_eq!(response.status(), 429);
        assert_eq!(header(&response, "content-type").as_deref(), Some("application/problem+json"));
        assert_eq!(header(&response, "retry-after"), Some(secs.to_string()), "{elapsed} ms");
        let expected = format!(
            r#"{{"type":"{QUOTA_EXCEEDED}","title":"Quota Exceeded","status":429,"detail":"rate limited by `login` (1/10s exceeded); retry after {secs}s","retry_after":{secs},"violated-policies":["1/10s"]}}"#
        );
        let body = body(response).await;
        assert_eq!(body, expected, "{elapsed} ms");
        assert!(!body.contains("203.0.113.9"));
    }
}

#[tokio::test]
async fn violated_policies_name_exactly_the_items_that_denied() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let policy = Policy::fixed_window("1/1s,2/1m").unwrap();
    let limiter = Limiter::new("api", policy.clone(), &store);
    limiter.limit("k", 1).await.unwrap();

    // Only the per-second rule is out of room.
    let denied = limiter.limit("k", 1).await.unwrap_err().into_response();
    let body_text = body(denied).await;
    assert!(body_text.ends_with(&format!(r#""violated-policies":{}}}"#, item_names(&policy, &[0]))), "{body_text}");
    assert!(body_text.contains(r#""detail":"rate limited by `api` (1/1s exceeded); retry after 1s""#), "{body_text}");

    clock.advance(Duration::from_secs(1));
    limiter.limit("k", 1).await.unwrap();
    // Both rules are out of room: both are named, in declared order.
    let response = limiter.limit("k", 1).await.unwrap_err().into_response();
    assert_eq!(header(&response, "retry-after").as_deref(), Some("59"));
    let body_text = body(response).await;
    assert!(body_text.ends_with(&format!(r#""violated-policies":{}}}"#, item_names(&policy, &[0, 1]))), "{body_text}");
    assert!(body_text.contains("(1/1s, 2/1m exceeded); retry after 59s"), "{body_text}");

    // A bucket is one item, named as RateLimit-Policy names it.
    let bucket = Policy::token_bucket(1, "1/10s").unwrap();
    let limiter = Limiter::new("bucket", bucket.clone(), &store);
    limiter.limit("k", 1).await.unwrap();
    let response = limiter.limit("k", 1).await.unwrap_err().into_response();
    assert_eq!(header(&response, "retry-after").as_deref(), Some("10"));
    let body_text = body(response).await;
    assert!(body_text.ends_with(&format!(r#""retry_after":10,"violated-policies":{}}}"#, item_names(&bucket, &[0]))));
}

#[tokio::test]
async fn a_cost_that_can_never_pass_has_no_retry_after_anywhere() {
    let policy = Policy::fixed_window("2/1m").unwrap();
    let limiter = Limiter::new("upload", policy.clone(), &Store::memory().with_clock(ManualClock::new()));
    let response = limiter.limit("k", 5).await.unwrap_err().into_response();
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after"), None);
    let body = body(response).await;
    assert!(!body.contains("retry_after"), "{body}");
    assert!(body.contains("this cost can never pass"), "{body}");
    assert!(body.ends_with(&format!(r#""violated-policies":{}}}"#, item_names(&policy, &[0]))), "{body}");
}

#[rate_limit(algo = "fixed_window", strategies = "1/1m")]
async fn unnamed() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(policy = "not-configured", on_error = "deny")]
async fn unconfigured() -> Result<(), RateLimited> {
    Ok(())
}

fn global_store() {
    static STORE: Once = Once::new();
    STORE.call_once(|| redlimit::init(Store::memory().with_clock(ManualClock::new())).unwrap());
}

#[tokio::test]
async fn a_default_name_never_reaches_the_body() {
    global_store();
    unnamed().await.unwrap();
    let response = unnamed().await.unwrap_err().into_response();
    let body = body(response).await;
    assert!(body.contains(r#""detail":"rate limited (1/1m exceeded); retry after 60s""#), "{body}");
    assert!(!body.contains("http_problem_details") && !body.contains("unnamed"), "{body}");
}

#[tokio::test]
async fn a_limiter_that_could_not_decide_is_a_503_that_says_so() {
    global_store();
    let response = unconfigured().await.unwrap_err().into_response();
    assert_eq!(response.status(), 503);
    assert_eq!((header(&response, "retry-after"), header(&response, "ratelimit")), (None, None));
    assert_eq!(
        body(response).await,
        r#"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the rate limiter's named policy is not configured, so the request could not be decided"}"#
    );
}
