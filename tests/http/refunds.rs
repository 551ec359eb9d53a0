//! `RateLimitLayer::refund_on`: a response whose status it picks gives its
//! request's permits back before it leaves, and states the key after the
//! refund; only what the store took comes back (not a dry run's pass over
//! the limit, nor `on_error`'s), and a policy that keeps no refunds says so
//! once. On the memory store and on Redis.

use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::http::{integer_items, request, send};
use redlimit_test_support::log_capture::LogCapture;

/// `/` answers 200, `/down` 502 (an upstream that failed), `/missing` 404.
fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "found" }))
        .route("/down", get(|| async { StatusCode::BAD_GATEWAY }))
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
        .layer(layer)
}

fn refunding(limiter: &Limiter) -> RateLimitLayer {
    let layer = RateLimitLayer::from_limiter(limiter.clone()).key(KeyBy::header("x-api-key").unwrap());
    layer.refund_on(|status: StatusCode| status.is_server_error())
}

/// `(status, r)` of the response to `path`: `r` of its one `RateLimit` item,
/// or -1 when it states none.
async fn ask(app: &mut Router, path: &str) -> (u16, i64) {
    let response: Response = send(app, request(path, &[("x-api-key", "k")])).await;
    let items = integer_items(response.headers(), "ratelimit", ["r", "t"]);
    (response.status().as_u16(), items.first().map_or(-1, |(_, r, _)| *r))
}

async fn server_errors_give_their_permits_back(store: &Store, at: &str) {
    let limiter = Limiter::new(format!("refunds_{at}"), Policy::fixed_window("2/1m").unwrap(), store);
    let mut app = app(refunding(&limiter));
    for _ in 0..3 {
        assert_eq!(ask(&mut app, "/down").await, (502, 2), "{at}: given back before the response left");
    }
    assert_eq!(ask(&mut app, "/missing").await, (404, 1), "{at}: a client error is not picked, so it counts");
    assert_eq!(ask(&mut app, "/").await, (200, 0), "{at}");
    assert_eq!(ask(&mut app, "/").await.0, 429, "{at}");
    assert_eq!(limiter.peek("k", 1).await.unwrap().remaining, 0, "{at}: a denial took nothing to give back");
}

#[tokio::test]
async fn server_errors_give_their_permits_back_on_the_memory_store() {
    server_errors_give_their_permits_back(&Store::memory(), "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn server_errors_give_their_permits_back_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    server_errors_give_their_permits_back(&stores.redis, "redis").await;
}

/// A dry run lets a request over the limit through without taking
/// anything: its failure gives nothing back, or it would raise the room.
#[tokio::test]
async fn a_dry_run_pass_over_the_limit_gives_nothing_back() {
    let limiter = Limiter::new("refunds_dry", Policy::token_bucket(1, "1/1h").unwrap(), &Store::memory());
    let mut app = app(refunding(&limiter).dry_run(true).dry_run_fields(true));
    assert_eq!(ask(&mut app, "/").await, (200, 0));
    assert_eq!(ask(&mut app, "/down").await, (502, 0), "over the limit, let through, not taken");
    assert_eq!(limiter.with_dry_run(true).peek("k", 1).await.unwrap().remaining, 0, "the trial's own state");
}

/// A sliding log keeps no refunds: the layer gives nothing back, says so
/// once, and answers as it would without the option.
#[tokio::test]
async fn a_policy_without_refunds_says_so_once() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let limiter = Limiter::new("refunds_log", Policy::sliding_log("2/1m").unwrap(), &Store::memory());
    let mut app = app(refunding(&limiter));
    assert_eq!(ask(&mut app, "/down").await, (502, 1));
    assert_eq!(ask(&mut app, "/down").await, (502, 0));
    assert_eq!(ask(&mut app, "/down").await.0, 429);
    let said = logs.text().lines().filter(|l| l.contains("a refund gives nothing back: a sliding_log policy")).count();
    assert_eq!(said, 1, "{}", logs.text());
}

/// The store down and `on_error = allow`: the request took nothing from
/// the store, so its failure tries no refund (and logs none).
#[cfg(feature = "redis")]
#[tokio::test]
async fn a_request_let_through_by_on_error_tries_no_refund() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let mut server = redlimit_test_support::redis_server::RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    server.kill();
    let limiter = Limiter::new("refunds_down", Policy::fixed_window("2/1m").unwrap(), &store);
    let mut app = app(refunding(&limiter.with_on_error(redlimit::OnError::Allow)));
    assert_eq!(ask(&mut app, "/down").await, (502, -1), "let through, nothing stated");
    assert!(!logs.text().contains("a refund could not be made"), "{}", logs.text());
}
