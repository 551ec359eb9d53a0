#![cfg(feature = "redis")]
//! `RateLimitLayer::named`: an HTTP limit whose policy comes from the
//! configured set and follows `policies::reload()`, on a private Redis with
//! a manual clock; and a named policy that is not configured.

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{policies, ManualClock, OnError, Store};
use redlimit_test_support::http::header;
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::RedisServer;
use tower_service::Service;

fn app(layer: RateLimitLayer) -> Router {
    Router::new().route("/", get(|| async { "ok" })).layer(layer)
}

async fn get_as(app: &mut Router, api_key: &str) -> Response {
    app.call(Request::builder().uri("/").header("x-api-key", api_key).body(Body::empty()).unwrap()).await.unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn a_named_layer_follows_reloads_and_a_missing_policy_is_settled_by_on_error() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let server = RedisServer::start();
    redlimit::init(Store::redis(&server.url()).await.unwrap().with_clock(ManualClock::new())).unwrap();

    let dir = std::env::temp_dir().join(format!("redlimit-http-named-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("policies.toml");
    let write = |strategies: &str| {
        std::fs::write(&file, format!("[policies.api]\nalgo = \"sliding_log\"\nstrategies = \"{strategies}\"\n"))
            .unwrap()
    };
    write("3/1m");
    policies::load(&file).unwrap();

    let mut api = app(RateLimitLayer::named("http.api", "api").key(KeyBy::header("x-api-key").unwrap()));
    for left in [2, 1, 0] {
        let ok = get_as(&mut api, "k1").await;
        assert_eq!(ok.status(), 200);
        assert_eq!(header(&ok, "ratelimit-policy").unwrap(), r#""api";q=3;w=60"#);
        assert_eq!(header(&ok, "ratelimit").unwrap(), format!(r#""api";r={left};t=60"#));
    }
    let denied = get_as(&mut api, "k1").await;
    assert_eq!(denied.status(), 429);
    assert_eq!(header(&denied, "retry-after").unwrap(), "60");

    // Raised: the three hits still count under the new limit.
    write("5/1m");
    policies::reload().unwrap();
    let raised = get_as(&mut api, "k1").await;
    assert_eq!(raised.status(), 200);
    assert_eq!(header(&raised, "ratelimit-policy").unwrap(), r#""api";q=5;w=60"#);
    assert_eq!(header(&raised, "ratelimit").unwrap(), r#""api";r=1;t=60"#);

    // Lowered below what is used: denied at once.
    write("2/1m");
    policies::reload().unwrap();
    let lowered = get_as(&mut api, "k1").await;
    assert_eq!(lowered.status(), 429);
    assert_eq!(header(&lowered, "ratelimit").unwrap(), r#""api";r=0;t=60"#);
    assert_eq!(get_as(&mut api, "k2").await.status(), 200, "another key has its own count");

    // Not configured: allowed uncounted by default, 503 under on_error = deny.
    let mut missing = app(RateLimitLayer::named("http.missing", "nope").key(KeyBy::header("x-api-key").unwrap()));
    let passed = get_as(&mut missing, "k1").await;
    assert_eq!(passed.status(), 200);
    assert_eq!(header(&passed, "ratelimit"), None, "no decision, no header fields");
    let mut strict = app(RateLimitLayer::named("http.strict", "nope")
        .key(KeyBy::header("x-api-key").unwrap())
        .on_error(OnError::Deny));
    let refused = get_as(&mut strict, "k1").await;
    assert_eq!(refused.status(), 503);
    let body = String::from_utf8(to_bytes(refused.into_body(), 4096).await.unwrap().to_vec()).unwrap();
    assert!(body.contains(r#""detail":"the named policy of rate limiter `http.strict` is not configured, so the request could not be decided""#), "{body}");

    let text = logs.text();
    assert!(
        text.contains(r#"policy "nope" is not configured in"#) && text.contains("request allowed (on_error = allow)"),
        "{text}"
    );
    assert!(text.contains("request denied (on_error = deny)"), "{text}");
    assert!(!text.contains("k1"), "a raw key was logged: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
