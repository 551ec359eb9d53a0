//! `RateLimitLayer::new` runs on the global store, looked up at the first
//! request: a layer built before `redlimit::init` uses the store set by it.
//! (Its own test binary: the global store is set once per process.)

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::routing::get;
use axum::Router;
use redlimit::http::RateLimitLayer;
use redlimit::{Limiter, ManualClock, Policy, Store};
use std::net::SocketAddr;
use std::time::Duration;
use tower_service::Service;

#[tokio::test]
async fn the_global_store_is_resolved_at_the_first_request() {
    let layer = RateLimitLayer::new("global_layer", Policy::fixed_window("2/1s").unwrap());
    let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer.clone());
    let mut other = Router::new().route("/other", get(|| async { "ok" })).layer(layer);

    let clock = ManualClock::new();
    redlimit::init(Store::memory().with_clock(clock.clone())).unwrap();
    let request = |path: &str| {
        let mut r = Request::builder().uri(path).body(Body::empty()).unwrap();
        r.extensions_mut().insert(ConnectInfo("192.0.2.7:1234".parse::<SocketAddr>().unwrap()));
        r
    };
    assert_eq!(app.call(request("/")).await.unwrap().headers()["ratelimit"], r#""2/1s";r=1;t=1"#);
    // Clones of one layer share its limiter.
    assert_eq!(other.call(request("/other")).await.unwrap().headers()["ratelimit"], r#""2/1s";r=0;t=1"#);
    assert_eq!(app.call(request("/")).await.unwrap().status(), 429);
    // The count is in the global store, under the layer's name and the client IP.
    let limiter =
        Limiter::new("global_layer", Policy::fixed_window("2/1s").unwrap(), redlimit::global().await.unwrap());
    assert_eq!(limiter.peek("192.0.2.7", 0).await.unwrap().remaining, 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(app.call(request("/")).await.unwrap().status(), 200);
}
