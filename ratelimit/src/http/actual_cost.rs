//! [`ActualCost`]: what a handler says its request cost, on its response,
//! for the layer to settle the request's estimate at.

/// A response extension a handler sets to say what its request actually
/// cost: every [`RateLimitLayer`](super::RateLimitLayer) the request passed
/// settles the permits it took (the request's cost, an estimate: see
/// [`cost_by`](super::RateLimitLayer::cost_by)) at this cost before the
/// response leaves, as [`Permit::settle`](crate::Permit::settle) does: the
/// rest comes back, an overage is charged past the limit if need be, and
/// the response's `RateLimit` field states the key after it.
///
/// It takes precedence over [`refund_on`](super::RateLimitLayer::refund_on);
/// a request a limit inside the layer denied gets all back whatever it
/// says. A settlement the store could not make leaves the estimate taken,
/// logged as an outage is; under an algorithm that keeps no refunds
/// (`sliding_window`, `sliding_log`) it does nothing and says so once at
/// WARN.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use axum::{body::Body, extract::Request, routing::get, Extension, Router};
/// use redlimit::http::{ActualCost, KeyBy, RateLimitLayer};
/// use redlimit::{Limiter, ManualClock, Policy, Store};
/// use tower_service::Service;
///
/// let limiter = Limiter::new("bytes", Policy::fixed_window("100/1m")?, &Store::memory().with_clock(ManualClock::new()));
/// // Each request reserves 10; the handler says what it sent.
/// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?).cost_by(|_: &Request| Some(10));
/// let mut app = Router::new()
///     .route("/small", get(|| async { (Extension(ActualCost(2)), "ok") }))
///     .route("/large", get(|| async { (Extension(ActualCost(95)), "ok") }))
///     .layer(layer);
/// let get = |path: &str| Request::builder().uri(path).header("x-api-key", "k").body(Body::empty()).unwrap();
///
/// assert_eq!(app.call(get("/small")).await.unwrap().headers()["ratelimit"], r#""100/1m";r=98;t=60"#);
/// assert_eq!(app.call(get("/large")).await.unwrap().headers()["ratelimit"], r#""100/1m";r=3;t=60"#);
/// assert_eq!(app.call(get("/small")).await.unwrap().status(), 429, "3 left, 10 reserved");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActualCost(pub u64);
