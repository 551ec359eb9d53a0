//! `RateLimitLayer`'s controls through an axum router on the memory store
//! with a manual clock: `on_rejected` shapes the rejection, `exempt` lets
//! requests through uncounted, and tiers chosen per request keep their own
//! counts.

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, MissingKey, RateLimitLayer, TierBy, Tiers, TrustedProxies};
use redlimit::{DenialReason, Limiter, ManualClock, Policy, RateLimited, Store};
use redlimit_test_support::http::{body, header, request, send};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn app(layer: RateLimitLayer) -> Router {
    Router::new().route("/", get(|| async { "ok" })).route("/health", get(|| async { "healthy" })).layer(layer)
}

/// What the hook saw of one denial.
#[derive(Debug, PartialEq)]
struct Seen {
    limiter: String,
    reason: DenialReason,
    retry_after: Option<Duration>,
    path: String,
    default_status: u16,
}

#[tokio::test]
async fn on_rejected_shapes_the_429_from_the_denial_the_request_and_the_default_response() {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("shaped", Policy::fixed_window("2/1m").unwrap(), &store);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key").unwrap()).on_rejected(
        move |denied: &RateLimited, request: &Request, default: Response| {
            log.lock().unwrap().push(Seen {
                limiter: denied.limiter().to_owned(),
                reason: denied.reason(),
                retry_after: denied.retry_after(),
                path: request.uri().path().to_owned(),
                default_status: default.status().as_u16(),
            });
            let mut response =
                (StatusCode::TOO_MANY_REQUESTS, format!("{{\"error\":\"quota\",\"key\":\"{}\"}}", denied.key()))
                    .into_response();
            response.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            let retry_after = default.headers()["retry-after"].clone();
            response.headers_mut().insert("retry-after", retry_after);
            response
        },
    );
    let mut app = app(layer);
    let as_k1 = || request("/", &[("x-api-key", "k1")]);

    for left in [1, 0] {
        let ok = send(&mut app, as_k1()).await;
        assert_eq!((ok.status().as_u16(), header(&ok, "ratelimit")), (200, Some(format!(r#""2/1m";r={left};t=60"#))));
    }
    assert!(seen.lock().unwrap().is_empty(), "allowed requests are not rejections");
    let denied = send(&mut app, as_k1()).await;
    assert_eq!(denied.status(), 429);
    assert_eq!(header(&denied, "content-type").as_deref(), Some("application/json"));
    assert_eq!(header(&denied, "retry-after").as_deref(), Some("60"));
    assert_eq!(header(&denied, "ratelimit"), None, "the hook's response is sent as it built it");
    assert_eq!(body(denied).await, r#"{"error":"quota","key":"k1"}"#);
    assert_eq!(
        *seen.lock().unwrap(),
        [Seen {
            limiter: "shaped".into(),
            reason: DenialReason::Limited,
            retry_after: Some(Duration::from_secs(60)),
            path: "/".into(),
            default_status: 429,
        }]
    );

    // A request without a key is not a denial: its 400 is the layer's own.
    let missing = send(&mut app, request("/", &[])).await;
    assert_eq!(missing.status(), 400);
    assert_eq!(header(&missing, "content-type").as_deref(), Some("application/problem+json"));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn exempt_requests_reach_the_route_uncounted_and_without_fields() {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("exempting", Policy::sliding_log("2/1m").unwrap(), &store);
    let proxies = TrustedProxies::new(["10.0.0.0/8"]).unwrap();
    let layer = RateLimitLayer::from_limiter(limiter.clone())
        .key(KeyBy::client_ip(proxies))
        .exempt(|request: &Request| request.uri().path() == "/health")
        .exempt(|request: &Request| request.headers().get("x-internal").is_some_and(|v| v == "monitor"));
    let mut app = app(layer);
    let from = |path: &str, headers: &[(&str, &str)]| {
        let mut request = request(path, headers);
        request.extensions_mut().insert(ConnectInfo("198.51.100.7:4000".parse::<SocketAddr>().unwrap()));
        request
    };

    for _ in 0..5 {
        let health = send(&mut app, from("/health", &[])).await;
        assert_eq!((health.status().as_u16(), header(&health, "ratelimit")), (200, None));
        assert_eq!(body(health).await, "healthy");
        let internal = send(&mut app, from("/", &[("x-internal", "monitor")])).await;
        assert_eq!((internal.status().as_u16(), header(&internal, "ratelimit-policy")), (200, None));
    }
    assert_eq!(limiter.peek("198.51.100.7", 0).await.unwrap().remaining, 2, "nothing was counted");

    // Exempt before the key is looked for: no peer address is needed.
    assert_eq!(send(&mut app, request("/health", &[])).await.status(), 200);
    assert_eq!(send(&mut app, request("/", &[])).await.status(), 500);

    // Anything else is counted, whatever else it says.
    let ok = send(&mut app, from("/", &[("x-internal", "someone")])).await;
    assert_eq!(header(&ok, "ratelimit").as_deref(), Some(r#""2/1m";r=1;t=60"#));
    assert_eq!(send(&mut app, from("/", &[])).await.status(), 200);
    assert_eq!(send(&mut app, from("/", &[])).await.status(), 429);
    assert_eq!(send(&mut app, from("/health", &[])).await.status(), 200, "still exempt once denied");
}

/// A plan an authentication middleware put on the request.
#[derive(Clone)]
struct Plan(&'static str);

#[tokio::test]
async fn tiers_chosen_per_request_keep_their_own_counts() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let free = Limiter::new("plans.free", Policy::fixed_window("2/1m").unwrap(), &store);
    let pro = Limiter::new("plans.pro", Policy::fixed_window("5/1m").unwrap(), &store);
    let tiers = Tiers::new(TierBy::function(|r: &Request| r.extensions().get::<Plan>().map(|p| p.0.to_owned())))
        .tier_limiter("free", free.clone())
        .tier_limiter("pro", pro.clone());
    let layer = RateLimitLayer::tiered("plans", tiers).unwrap().key(KeyBy::header("x-api-key").unwrap());
    let mut app = app(layer);
    let on = |plan: Option<&'static str>, key: &str| {
        let mut request = request("/", &[("x-api-key", key)]);
        if let Some(plan) = plan {
            request.extensions_mut().insert(Plan(plan));
        }
        request
    };

    // The same key on both plans: two counts.
    let first_free = send(&mut app, on(Some("free"), "k1")).await;
    assert_eq!(header(&first_free, "ratelimit-policy").as_deref(), Some(r#""2/1m";q=2;w=60"#));
    assert_eq!(header(&first_free, "ratelimit").as_deref(), Some(r#""2/1m";r=1;t=60"#));
    assert_eq!(send(&mut app, on(Some("free"), "k1")).await.status(), 200);
    let denied = send(&mut app, on(Some("free"), "k1")).await;
    assert_eq!(denied.status(), 429);
    assert!(body(denied).await.contains("rate limited by `plans.free` (2/1m exceeded)"));
    for left in (0..5).rev() {
        let ok = send(&mut app, on(Some("pro"), "k1")).await;
        assert_eq!(ok.status(), 200, "pro has its own count");
        assert_eq!(header(&ok, "ratelimit").unwrap(), format!(r#""5/1m";r={left};t=60"#));
    }
    assert_eq!(send(&mut app, on(Some("pro"), "k1")).await.status(), 429);
    assert_eq!((free.peek("k1", 0).await.unwrap().remaining, pro.peek("k1", 0).await.unwrap().remaining), (0, 0));
    clock.advance(Duration::from_secs(60));
    assert_eq!(send(&mut app, on(Some("pro"), "k1")).await.status(), 200);
    assert_eq!(send(&mut app, on(Some("free"), "k1")).await.status(), 200);

    // No fallback: a plan that is not listed, or none, is a 400 that counts nothing.
    for plan in [None, Some("gold"), Some("")] {
        let unknown = send(&mut app, on(plan, "k2")).await;
        assert_eq!(unknown.status(), 400, "{plan:?}");
        assert_eq!(header(&unknown, "content-type").as_deref(), Some("application/problem+json"));
        let text = body(unknown).await;
        assert!(text.contains("rate limited by `plans` per tier (`free`, `pro`)"), "{text}");
        assert!(!text.contains("gold"), "the request's value is not echoed: {text}");
    }
    assert_eq!(free.peek("k2", 0).await.unwrap().remaining, 2);
}

#[tokio::test]
async fn a_tier_header_with_a_fallback_counts_the_unknown_under_the_fallback() {
    let store = Store::memory().with_clock(ManualClock::new());
    let free = Limiter::new("header_plans.free", Policy::fixed_window("3/1h").unwrap(), &store);
    let pro = Limiter::new("header_plans.pro", Policy::fixed_window("100/1h").unwrap(), &store);
    let tiers = Tiers::new(TierBy::header("x-plan").unwrap())
        .tier_limiter("free", free.clone())
        .tier_limiter("pro", pro.clone())
        .fallback("free");
    let rejections = Arc::new(AtomicUsize::new(0));
    let counted = rejections.clone();
    let layer = RateLimitLayer::tiered("header_plans", tiers)
        .unwrap()
        .key(KeyBy::header("x-api-key").unwrap())
        .missing_key(MissingKey::Allow)
        .on_rejected(move |denied: &RateLimited, _: &Request, default: Response| {
            assert_eq!(denied.limiter(), "header_plans.free");
            counted.fetch_add(1, Ordering::Relaxed);
            default
        });
    let mut app = app(layer);

    assert_eq!(send(&mut app, request("/", &[("x-api-key", "k"), ("x-plan", "free")])).await.status(), 200);
    assert_eq!(send(&mut app, request("/", &[("x-api-key", "k"), ("x-plan", "platinum")])).await.status(), 200);
    assert_eq!(send(&mut app, request("/", &[("x-api-key", "k")])).await.status(), 200);
    let denied = send(&mut app, request("/", &[("x-api-key", "k"), ("x-plan", "FREE")])).await;
    assert_eq!(denied.status(), 429, "tier names match exactly: `FREE` falls back to `free`");
    assert_eq!(header(&denied, "ratelimit").as_deref(), Some(r#""3/1h";r=0;t=3600"#));
    assert_eq!(rejections.load(Ordering::Relaxed), 1);
    let pro_ok = send(&mut app, request("/", &[("x-api-key", "k"), ("x-plan", "pro")])).await;
    assert_eq!(header(&pro_ok, "ratelimit").as_deref(), Some(r#""100/1h";r=99;t=3600"#));
    // The layer's other options apply to every tier.
    let keyless = send(&mut app, request("/", &[("x-plan", "free")])).await;
    assert_eq!((keyless.status().as_u16(), header(&keyless, "ratelimit")), (200, None));
}

#[test]
fn tiers_that_cannot_work_are_errors_that_say_why() {
    let store = Store::memory();
    let policy = || Policy::fixed_window("1/1s").unwrap();
    let by = || TierBy::header("x-plan").unwrap();
    let cases = [
        (Tiers::new(by()), "there is none"),
        (Tiers::new(by()).tier("free", policy()).tier("free", policy()), "tier `free` is listed twice"),
        (Tiers::new(by()).tier("free", policy()).fallback("gold"), "the fallback `gold` is not one of `free`"),
        (
            Tiers::new(by())
                .tier_limiter("a", Limiter::new("same", policy(), &store))
                .tier_limiter("b", Limiter::new("same", policy(), &store)),
            "tiers `a` and `b` both count under the limiter name `same`",
        ),
        (
            Tiers::new(by()).tier("free", policy()).tier_limiter("mine", Limiter::new("api.free", policy(), &store)),
            "tiers `free` and `mine` both count under the limiter name `api.free`",
        ),
    ];
    for (tiers, why) in cases {
        let message = RateLimitLayer::tiered("api", tiers).err().unwrap().to_string();
        assert!(message.contains("the tiers of `api`") && message.contains(why), "{message}");
    }
    assert!(TierBy::header("x plan").unwrap_err().to_string().contains("`x plan`"));
}

#[tokio::test]
async fn a_layer_cost_is_advertised_in_whole_requests_on_allowed_and_denied_responses() {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("costly", Policy::token_bucket(10, "1/1s").unwrap(), &store);
    let mut app = app(RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key").unwrap()).cost(3));
    // Three permits a request: a bucket of 10 holds 3 requests, and a
    // request's permits are back 2 s after the last one was spent.
    for left in [2, 1, 0] {
        let ok = send(&mut app, request("/", &[("x-api-key", "k")])).await;
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(header(&ok, "ratelimit-policy").unwrap(), r#""token_bucket 10 per 1/1s";q=3;w=10"#);
        assert_eq!(header(&ok, "ratelimit").unwrap(), format!(r#""token_bucket 10 per 1/1s";r={left};t=2"#));
    }
    let denied = send(&mut app, request("/", &[("x-api-key", "k")])).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&denied, "ratelimit-policy").unwrap(), r#""token_bucket 10 per 1/1s";q=3;w=10"#);
    assert_eq!(header(&denied, "ratelimit").unwrap(), r#""token_bucket 10 per 1/1s";r=0;t=2"#);
    assert_eq!(header(&denied, "retry-after").unwrap(), "2");
}
