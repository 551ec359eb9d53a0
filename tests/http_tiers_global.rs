//! Tiers on the global store: a tier given a policy or a configured
//! policy's name is limited under `<layer>.<tier>`, and a tier whose named
//! policy is not configured is settled by the layer's `on_error` (a denial
//! `on_rejected` sees). (Its own test binary: the global store is set once
//! per process.)

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer, TierBy, Tiers};
use redlimit::{policies, DenialReason, Limiter, ManualClock, OnError, Policy, RateLimited, Store};
use redlimit_test_support::http::header;
use tower_service::Service;

async fn send(app: &mut Router, plan: &str) -> Response {
    let request = Request::builder().uri("/").header("x-api-key", "k").header("x-plan", plan);
    app.call(request.body(Body::empty()).unwrap()).await.unwrap()
}

#[tokio::test]
async fn tiers_of_policies_and_configured_names_count_under_the_layer_and_tier_names() {
    redlimit::init(Store::memory().with_clock(ManualClock::new())).unwrap();
    policies::load_str("inline", "[policies.pro_plan]\nalgo = \"fixed_window\"\nstrategies = \"3/1h\"\n").unwrap();
    let tiers = Tiers::new(TierBy::header("x-plan").unwrap())
        .tier("free", Policy::fixed_window("1/1h").unwrap())
        .tier_named("pro", "pro_plan")
        .tier_named("beta", "not_configured");
    let layer = RateLimitLayer::tiered("site", tiers).unwrap().key(KeyBy::header("x-api-key").unwrap());
    let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer.clone());

    assert_eq!(header(&send(&mut app, "free").await, "ratelimit").as_deref(), Some(r#""1/1h";r=0;t=3600"#));
    assert_eq!(send(&mut app, "free").await.status(), 429);
    assert_eq!(
        header(&send(&mut app, "pro").await, "ratelimit").as_deref(),
        Some(r#""pro_plan";r=2;t=3600"#),
        "named by its configured policy"
    );
    let global = redlimit::global().await.unwrap();
    let free = Limiter::new("site.free", Policy::fixed_window("1/1h").unwrap(), global);
    let pro = Limiter::new("site.pro", Policy::fixed_window("3/1h").unwrap(), global);
    assert_eq!((free.peek("k", 0).await.unwrap().remaining, pro.peek("k", 0).await.unwrap().remaining), (0, 2));

    // Not configured: through uncounted by default ...
    let beta = send(&mut app, "beta").await;
    assert_eq!((beta.status().as_u16(), header(&beta, "ratelimit")), (200, None));
    // ... and a denial on_rejected sees under on_error = deny, applied to every tier.
    let strict = layer.on_error(OnError::Deny).on_rejected(|denied: &RateLimited, _: &Request, default: Response| {
        assert_eq!((denied.reason(), denied.limiter()), (DenialReason::PolicyNotConfigured, "site.beta"));
        let (mut parts, _) = default.into_parts();
        parts.headers.insert("x-denied-by", denied.limiter().parse().unwrap());
        Response::from_parts(parts, Body::from("beta is closed"))
    });
    let mut app = Router::new().route("/", get(|| async { "ok" })).layer(strict);
    let refused = send(&mut app, "beta").await;
    assert_eq!((refused.status().as_u16(), header(&refused, "x-denied-by")), (503, Some("site.beta".into())));
    assert_eq!(&to_bytes(refused.into_body(), 1024).await.unwrap()[..], b"beta is closed");
    assert_eq!(send(&mut app, "pro").await.status(), 200, "the configured tiers still decide");
}
