//! `ActualCost`: a handler says on its response what its request cost, and
//! every `RateLimitLayer` it passed settles the request's estimate
//! (`cost_by`) at it before the response leaves: the rest comes back, an
//! overage is owed past the limit, the `RateLimit` field states the key
//! after it; it wins over `refund_on`, and a request a limit inside denied
//! gets all back. On the memory store and on Redis.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use redlimit::http::{ActualCost, KeyBy, RateLimitLayer};
use redlimit::{Limiter, Policy};
use redlimit_test_support::http::{integer_items, request, send};
use redlimit_test_support::stores::BothStores;

/// `/used/<n>` answers 200 having cost n; `/failed/<n>` 502 having cost n;
/// `/plain` 200 saying nothing.
fn routes() -> Router {
    Router::new()
        .route(
            "/used/{n}",
            get(|axum::extract::Path(n): axum::extract::Path<u64>| async move { (Extension(ActualCost(n)), "done") }),
        )
        .route(
            "/failed/{n}",
            get(|axum::extract::Path(n): axum::extract::Path<u64>| async move {
                (StatusCode::BAD_GATEWAY, Extension(ActualCost(n))).into_response()
            }),
        )
        .route("/plain", get(|| async { "done" }))
}

/// Each request reserves the `x-estimate` header's number of tokens.
fn layer(limiter: &Limiter) -> RateLimitLayer {
    RateLimitLayer::from_limiter(limiter.clone())
        .key(KeyBy::header("x-api-key").unwrap())
        .cost_by(|request: &Request| request.headers().get("x-estimate")?.to_str().ok()?.parse().ok())
        .refund_on(|status: StatusCode| status.is_server_error())
}

/// `(status, r)` of the response: `r` of its first `RateLimit` item, or -1.
async fn ask(app: &mut Router, path: &str, estimate: u64) -> (u16, i64) {
    let estimate = estimate.to_string();
    let response: Response = send(app, request(path, &[("x-api-key", "k"), ("x-estimate", &estimate)])).await;
    let items = integer_items(response.headers(), "ratelimit", ["r", "t"]);
    (response.status().as_u16(), items.first().map_or(-1, |(_, r, _)| *r))
}

#[tokio::test]
async fn a_response_settles_its_requests_estimate_at_what_the_handler_says_on_both_stores() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let tokens = Limiter::new(format!("http-settle-{at}"), Policy::token_bucket(100, "100/1m").unwrap(), store);
        let mut app = routes().layer(layer(&tokens));
        assert_eq!(ask(&mut app, "/used/12", 30).await, (200, 88), "{at}: 18 of 30 back");
        assert_eq!(ask(&mut app, "/plain", 30).await, (200, 58), "{at}: no word: the estimate stays");
        assert_eq!(ask(&mut app, "/used/0", 0).await, (200, 58), "{at}");
        assert_eq!(ask(&mut app, "/used/5", 0).await, (200, 53), "{at}: an estimate of 0, charged");
        assert_eq!(ask(&mut app, "/used/0", 5).await, (200, 53), "{at}: all back");
        assert_eq!(ask(&mut app, "/failed/5", 10).await, (502, 48), "{at}: said, it wins over refund_on");
        assert_eq!(ask(&mut app, "/used/90", 40).await, (200, 0), "{at}: 42 owed past the limit");
        let owed = tokens.peek("k", 0).await.unwrap();
        assert_eq!((owed.allowed, owed.remaining), (false, 0), "{at}");
        assert_eq!(ask(&mut app, "/used/1", 1).await.0, 429, "{at}: waited off first");
        assert_eq!(owed.retry_after, Some(std::time::Duration::from_millis(25_200)), "{at}: 42 at 100/1m");
    }
}

/// Two layers: the outer per key, the inner per route; each settles its
/// own reservation at the same actual cost, and a denial inside gives the
/// outer's all back.
#[tokio::test]
async fn stacked_layers_each_settle_their_own_reservation() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let per_key = Limiter::new(format!("http-settle-key-{at}"), Policy::fixed_window("100/1h").unwrap(), store);
        let route = Limiter::new(format!("http-settle-route-{at}"), Policy::gcra("10/1h", 49).unwrap(), store);
        let mut app = routes().layer(layer(&route)).layer(layer(&per_key));
        assert_eq!(ask(&mut app, "/used/20", 5).await.0, 200, "{at}");
        assert_eq!(per_key.peek("k", 0).await.unwrap().remaining, 80, "{at}");
        assert_eq!(route.peek("k", 0).await.unwrap().remaining, 30, "{at}");
        assert_eq!(ask(&mut app, "/used/1", 40).await.0, 429, "{at}: the route's limit denies 40");
        assert_eq!(per_key.peek("k", 0).await.unwrap().remaining, 80, "{at}: the outer reservation came back");
    }
}
