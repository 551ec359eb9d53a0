//! A call that reaches the global store while a `redlimit::Scope` is live
//! and no global store was set (a task spawned out of its scope, a limiter
//! built on `redlimit::global()`) is refused: it fails with an error naming
//! the fix, never settled by `on_error` (a call made wrongly is not an
//! outage), said once at WARN per limiter, and no store counts it. Once no scope is live, the global store built for want of
//! another decides, said once at WARN. One test, because the global store
//! is process-wide.
//!
//! `cargo test --test scope_outside_refused`

use redlimit::{rate_limit, DenialReason, Error, Limiter, ManualClock, Policy, RateLimited, Scope, Store};
use redlimit_test_support::log_capture::LogCapture;

#[rate_limit(name = "outside.allow", algo = "fixed_window", strategies = "5/1h", key = "<user>")]
async fn allowing(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(name = "outside.deny", algo = "fixed_window", strategies = "5/1h", key = "<user>", on_error = "deny")]
async fn denying(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

const FIX: &str = "never set (redlimit::init), while a redlimit::Scope is live";

#[tokio::test(flavor = "current_thread")]
async fn a_call_outside_every_scope_while_one_is_live_is_refused() {
    std::env::remove_var(redlimit::REDIS_URL_VAR);
    let logs = LogCapture::default();
    let _guard = logs.install();

    #[cfg(feature = "redis")]
    let server = redlimit_test_support::redis_server::RedisServer::start();
    let scope_stores = [
        ("memory", Store::memory().with_clock(ManualClock::new())),
        #[cfg(feature = "redis")]
        ("redis", Store::redis(&server.url()).await.unwrap().with_clock(ManualClock::new())),
    ];
    for (at, store) in scope_stores {
        let scope = Scope::new(store.clone());
        assert!(scope.run(allowing("ann")).await.is_ok(), "{at}: in the scope");

        // A task spawned without `in_current_scope` is out of the scope.
        let (allowed, denied) = tokio::spawn(async { (allowing("ann").await, denying("ann").await) }).await.unwrap();
        for (refused, on_error) in [(allowed, "allow"), (denied, "deny")] {
            let refused = refused.unwrap_err();
            assert_eq!(refused.reason(), DenialReason::Misused, "{at}: on_error = {on_error}");
            assert!(refused.to_string().contains(FIX), "{at}: {refused}");
        }

        // A limiter built on the global store fails the same way.
        let global = redlimit::global().await.unwrap();
        let explicit = Limiter::new("outside.explicit", Policy::fixed_window("5/1h").unwrap(), global);
        let error = explicit.check("ann", 1).await.unwrap_err();
        assert!(matches!(error, Error::Misuse(_)), "{at}: {error:?}");
        assert!(error.to_string().contains(FIX), "{at}: {error}");

        // A layer on the global store answers such a request 500: the server's mistake.
        {
            use redlimit::http::{KeyBy, RateLimitLayer};
            use tower_service::Service;
            let layer = RateLimitLayer::new("outside.layer", Policy::fixed_window("5/1h").unwrap())
                .key(KeyBy::header("x-user").unwrap());
            let mut app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" })).layer(layer);
            let request = axum::http::Request::builder().uri("/").header("x-user", "ann");
            let request = request.body(axum::body::Body::empty()).unwrap();
            let response = tokio::spawn(async move { app.call(request).await }).await.unwrap().unwrap();
            assert_eq!(response.status(), 500, "{at}");
        }

        // The scope's store counted only the call made in it (a peek answers as the next call would).
        let counted = Limiter::new("outside.allow", Policy::fixed_window("5/1h").unwrap(), &store);
        assert_eq!(counted.peek("ann", 1).await.unwrap().remaining, 3, "{at}");
        drop(scope);
    }
    let text = logs.text();
    assert!(text.contains(FIX) && text.contains("limiter=\"outside.allow\""), "{text}");

    // No scope is live: the global store built for want of another decides,
    // and it never counted the refused calls.
    for call in 0..6 {
        assert_eq!(allowing("ann").await.is_ok(), call < 5, "call {call}");
    }
    let text = logs.text();
    assert_eq!(text.matches("no global rate limit store was set").count(), 1, "{text}");
    assert!(text.contains("WARN") && text.contains("decided in memory, per process"), "{text}");
}
