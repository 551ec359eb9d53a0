//! `RateLimitLayer::cost_by`: each request is charged the permits computed
//! from it, and its header fields state the key after its own cost (in
//! permits); a denial takes nothing, a cost of 0 takes nothing, a cost the
//! policy can never admit is denied without `Retry-After`, a refund gives
//! back what the request took, and a request whose cost cannot be read is
//! answered without being charged; a dry run, `on_error`, a concurrency
//! policy and `quota_unit` each count the request's own cost. On the
//! memory store and on Redis, both on a manual clock.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{Limiter, ManualClock, Policy, Store};
use redlimit_test_support::http::{body, header, integer_items, request, send};
use redlimit_test_support::log_capture::LogCapture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tower_service::Service;

/// A manual clock and the stores the tests run on: the memory store, and
/// with the `redis` feature a private redis-server on the same clock.
struct Stores {
    clock: ManualClock,
    each: Vec<(&'static str, Store)>,
    #[cfg(feature = "redis")]
    _both: redlimit_test_support::stores::BothStores,
}

impl Stores {
    #[cfg(feature = "redis")]
    async fn start() -> Stores {
        let both = redlimit_test_support::stores::BothStores::start().await;
        let each = vec![("memory", both.memory.clone()), ("redis", both.redis.clone())];
        Stores { clock: both.clock.clone(), each, _both: both }
    }

    #[cfg(not(feature = "redis"))]
    async fn start() -> Stores {
        let clock = ManualClock::new();
        Stores { each: vec![("memory", Store::memory().with_clock(clock.clone()))], clock }
    }
}

/// The permits named by the request's `x-items` field; none when it is
/// missing or not a number.
fn items(request: &Request) -> Option<u64> {
    request.headers().get("x-items")?.to_str().ok()?.parse().ok()
}

fn layer(limiter: &Limiter) -> RateLimitLayer {
    RateLimitLayer::from_limiter(limiter.clone()).key(KeyBy::header("x-api-key").unwrap()).cost_by(items)
}

/// `/` answers 200, `/down` 502 (an upstream that failed).
fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "done" }))
        .route("/down", get(|| async { StatusCode::BAD_GATEWAY }))
        .layer(layer)
}

async fn call(app: &mut Router, path: &str, items: &str) -> Response {
    send(app, request(path, &[("x-api-key", "k"), ("x-items", items)])).await
}

/// `(status, r, t, Retry-After)` of the response to a request of `items`:
/// `r` and `t` of its one `RateLimit` item (-1 when it states none).
async fn ask(app: &mut Router, path: &str, items: &str) -> (u16, i64, i64, Option<String>) {
    let response = call(app, path, items).await;
    let (r, t) = integer_items(response.headers(), "ratelimit", ["r", "t"]).first().map_or((-1, -1), |i| (i.1, i.2));
    (response.status().as_u16(), r, t, header(&response, "retry-after"))
}

fn secs(n: u64) -> Option<String> {
    Some(n.to_string())
}

#[tokio::test]
async fn each_request_is_charged_its_own_cost_and_its_fields_say_so() {
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_window_{at}"), Policy::fixed_window("10/1m").unwrap(), store);
        let mut app = app(layer(&limiter));
        let untouched = call(&mut app, "/", "0").await;
        assert_eq!(header(&untouched, "ratelimit").as_deref(), Some(r#""10/1m";r=10;t=0"#), "{at}: stated, not taken");
        let first = call(&mut app, "/", "3").await;
        assert_eq!(header(&first, "ratelimit-policy").as_deref(), Some(r#""10/1m";q=10;w=60"#), "{at}: in permits");
        assert_eq!(header(&first, "ratelimit").as_deref(), Some(r#""10/1m";r=7;t=60"#), "{at}");
        assert_eq!(ask(&mut app, "/", "5").await, (200, 2, 60, None), "{at}");
        assert_eq!(ask(&mut app, "/", "4").await, (429, 2, 60, secs(60)), "{at}: denied, and took nothing");
        assert_eq!(ask(&mut app, "/", "0").await, (200, 2, 60, None), "{at}: a cost of 0 takes nothing");
        assert_eq!(ask(&mut app, "/", "2").await, (200, 0, 60, None), "{at}: what the denial did not take");
        assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 0, "{at}");
    }
}

/// A bucket's `Retry-After` is the wait for this request's own tokens.
#[tokio::test]
async fn a_denial_names_the_wait_for_its_own_cost() {
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_bucket_{at}"), Policy::token_bucket(10, "1/1s").unwrap(), store);
        let mut app = app(layer(&limiter));
        assert_eq!(ask(&mut app, "/", "8").await, (200, 2, 1, None), "{at}: the next token in 1 s");
        // `t` is the next permit's; `Retry-After` waits for all this request needs.
        assert_eq!(ask(&mut app, "/", "5").await, (429, 2, 1, secs(3)), "{at}: 3 more tokens take 3 s");
        assert_eq!(ask(&mut app, "/", "1").await, (200, 1, 1, None), "{at}: the denial took nothing");
        assert_eq!(ask(&mut app, "/", "5").await, (429, 1, 1, secs(4)), "{at}");
        stores.clock.advance(Duration::from_secs(4));
        assert_eq!(ask(&mut app, "/", "5").await, (200, 0, 1, None), "{at}: obeying Retry-After passes");
    }
}

#[tokio::test]
async fn a_cost_the_policy_can_never_admit_is_denied_without_a_wait() {
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_huge_{at}"), Policy::fixed_window("10/1m").unwrap(), store);
        let mut app = app(layer(&limiter));
        assert_eq!(ask(&mut app, "/", "4").await.0, 200, "{at}");
        for huge in ["11", &u64::MAX.to_string()] {
            let denied = call(&mut app, "/", huge).await;
            assert_eq!((denied.status().as_u16(), header(&denied, "retry-after")), (429, None), "{at}: {huge}");
            assert_eq!(header(&denied, "ratelimit").as_deref(), Some(r#""10/1m";r=6;t=60"#), "{at}: {huge}");
            let detail = body(denied).await;
            assert!(detail.contains("can never pass"), "{at}: {huge}: {detail}");
        }
        assert_eq!(ask(&mut app, "/", "6").await, (200, 0, 60, None), "{at}: nothing was taken");
    }
}

/// `refund_on` gives back exactly what the failed request took, whatever it was.
#[tokio::test]
async fn a_refund_gives_back_the_computed_cost() {
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_refund_{at}"), Policy::fixed_window("10/1m").unwrap(), store);
        let mut app = app(layer(&limiter).refund_on(|status: StatusCode| status.is_server_error()));
        assert_eq!(ask(&mut app, "/", "4").await, (200, 6, 60, None), "{at}");
        assert_eq!(ask(&mut app, "/down", "6").await, (502, 6, 60, None), "{at}: its 6 given back");
        assert_eq!(ask(&mut app, "/down", "0").await, (502, 6, 60, None), "{at}: took nothing, gave nothing");
        assert_eq!(ask(&mut app, "/down", "7").await, (429, 6, 60, secs(60)), "{at}: denied, nothing to give back");
        assert_eq!(ask(&mut app, "/", "6").await, (200, 0, 60, None), "{at}");
        assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 0, "{at}");
    }
}

/// A request whose cost cannot be read is a client's mistake: a 400 that
/// never reaches the route and takes nothing. A cost function that panics
/// is the server's: a 500, logged once, and the next request is served.
#[tokio::test]
async fn a_cost_that_cannot_be_read_is_answered_and_charged_nothing() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_unread_{at}"), Policy::fixed_window("10/1m").unwrap(), store);
        let served = Arc::new(AtomicUsize::new(0));
        let route = {
            let served = served.clone();
            move || async move {
                served.fetch_add(1, Ordering::Relaxed);
                "done"
            }
        };
        let cost_of = |request: &Request| match request.headers().get("x-items").map(|v| v.as_bytes()) {
            Some(b"boom") => panic!("the cost function failed"),
            _ => items(request),
        };
        let limit = RateLimitLayer::from_limiter(limiter.clone()).key(KeyBy::header("x-api-key").unwrap());
        let mut app = Router::new().route("/", get(route)).layer(limit.cost_by(cost_of));

        let malformed = call(&mut app, "/", "many").await;
        assert_eq!((malformed.status().as_u16(), header(&malformed, "ratelimit")), (400, None), "{at}");
        assert_eq!(header(&malformed, "content-type").as_deref(), Some("application/problem+json"), "{at}");
        assert!(body(malformed).await.contains("cost could not be read"), "{at}");
        let missing = send(&mut app, request("/", &[("x-api-key", "k")])).await;
        assert_eq!(missing.status(), 400, "{at}");
        for _ in 0..2 {
            let panicked = call(&mut app, "/", "boom").await;
            assert_eq!((panicked.status().as_u16(), header(&panicked, "ratelimit")), (500, None), "{at}");
        }
        assert_eq!(served.load(Ordering::Relaxed), 0, "{at}: the route never ran");
        assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 10, "{at}: nothing was taken");
        assert_eq!(ask(&mut app, "/", "3").await, (200, 7, 60, None), "{at}: the next request is served");
    }
    let told = logs.text().lines().filter(|l| l.contains("the cost function of rate limiter")).count();
    assert_eq!(told, stores.each.len(), "once per layer: {}", logs.text());
}

/// An exempt request, or one without a key let through, is not counted:
/// its cost is never computed.
#[tokio::test]
async fn a_request_not_counted_is_not_costed() {
    let limiter = Limiter::new("cost_uncounted", Policy::fixed_window("10/1m").unwrap(), &Store::memory());
    let costed = Arc::new(AtomicUsize::new(0));
    let layer = {
        let costed = costed.clone();
        RateLimitLayer::from_limiter(limiter)
            .key(KeyBy::header("x-api-key").unwrap())
            .missing_key(redlimit::http::MissingKey::Allow)
            .exempt(|request: &Request| request.uri().path() == "/health")
            .cost_by(move |request: &Request| {
                costed.fetch_add(1, Ordering::Relaxed);
                items(request)
            })
    };
    let mut app =
        Router::new().route("/", get(|| async { "ok" })).route("/health", get(|| async { "ok" })).layer(layer);
    assert_eq!(send(&mut app, request("/health", &[("x-api-key", "k"), ("x-items", "x")])).await.status(), 200);
    assert_eq!(send(&mut app, request("/", &[("x-items", "x")])).await.status(), 200, "no key: let through");
    assert_eq!(costed.load(Ordering::Relaxed), 0);
    assert_eq!(ask(&mut app, "/", "3").await, (200, 7, 60, None));
    assert_eq!(costed.load(Ordering::Relaxed), 1);
}

/// `cost` and `cost_by` replace each other: the last one set wins. A fixed
/// cost's fields count whole requests of it; a computed one's, permits.
#[tokio::test]
async fn the_last_cost_set_wins() {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("cost_last", Policy::fixed_window("10/1m").unwrap(), &store);
    let keyed = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key").unwrap());

    let mut computed = app(keyed.clone().cost(5).cost_by(items));
    let response = send(&mut computed, request("/", &[("x-api-key", "a"), ("x-items", "3")])).await;
    assert_eq!(header(&response, "ratelimit-policy").as_deref(), Some(r#""10/1m";q=10;w=60"#));
    assert_eq!(header(&response, "ratelimit").as_deref(), Some(r#""10/1m";r=7;t=60"#));

    let mut fixed = app(keyed.cost_by(items).cost(2));
    let response = send(&mut fixed, request("/", &[("x-api-key", "b"), ("x-items", "3")])).await;
    assert_eq!(header(&response, "ratelimit-policy").as_deref(), Some(r#""10/1m";q=5;w=60"#), "whole requests");
    assert_eq!(header(&response, "ratelimit").as_deref(), Some(r#""10/1m";r=4;t=60"#), "2 of 10 taken");
}

/// A dry run decides each request at its own cost: one over the limit, or
/// one that can never pass, reaches the route and takes nothing, its fields
/// (asked for) stating the trial's count, and never a `Retry-After`: a
/// request let through was refused nothing.
#[tokio::test]
async fn a_dry_run_decides_each_request_at_its_own_cost() {
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_dry_{at}"), Policy::fixed_window("10/1m").unwrap(), store);
        let mut app = app(layer(&limiter).dry_run(true).dry_run_fields(true));
        assert_eq!(ask(&mut app, "/", "8").await, (200, 2, 60, None), "{at}");
        assert_eq!(ask(&mut app, "/", "3").await, (200, 2, 60, None), "{at}: would be denied, let through");
        assert_eq!(ask(&mut app, "/", "11").await, (200, 2, 60, None), "{at}: could never pass, let through");
        assert_eq!(ask(&mut app, "/", "2").await, (200, 0, 60, None), "{at}: nothing taken by the passes over");
    }
}

/// Under a concurrency policy a request holds as many permits as it costs
/// while it is served; the fields count permits in flight.
#[tokio::test]
async fn a_concurrency_request_holds_its_cost_in_permits() {
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_conc_{at}"), Policy::concurrency(5, "30s").unwrap(), store);
        let (started, finish) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
        let slow = {
            let (started, finish) = (started.clone(), finish.clone());
            move || async move {
                started.add_permits(1);
                finish.acquire().await.unwrap().forget();
                "done"
            }
        };
        let app = Router::new().route("/slow", get(slow)).route("/", get(|| async { "done" })).layer(layer(&limiter));
        let in_flight = tokio::spawn({
            let mut app = app.clone();
            async move { app.call(request("/slow", &[("x-api-key", "k"), ("x-items", "3")])).await.unwrap() }
        });
        started.acquire().await.unwrap().forget();
        let state = |response: &Response| (response.status().as_u16(), header(response, "ratelimit"));
        let busy = call(&mut app.clone(), "/", "3").await;
        assert_eq!(state(&busy), (429, Some(r#""concurrency 5";r=2"#.into())), "{at}: 3 of 5 held");
        assert_eq!(header(&busy, "retry-after"), None, "{at}");
        let fits = call(&mut app.clone(), "/", "2").await;
        assert_eq!(state(&fits), (200, Some(r#""concurrency 5";r=0"#.into())), "{at}: 2 more fit");
        body(fits).await; // sent: its 2 permits are back
        let never = call(&mut app.clone(), "/", "6").await;
        assert_eq!(never.status(), 429, "{at}");
        assert!(body(never).await.contains("can never pass"), "{at}: more than the limit, not a wait");
        finish.add_permits(1);
        let done = in_flight.await.unwrap();
        assert_eq!(state(&done), (200, Some(r#""concurrency 5";r=2"#.into())), "{at}: stated when taken");
        body(done).await; // its body ends once its 3 permits are back
        assert_eq!(call(&mut app.clone(), "/", "5").await.status(), 200, "{at}: all 5 back");
    }
}

/// An upload charged by its `Content-Length` states its permits as bytes
/// (`qu="content-bytes"`), its 429 too; one too large for the whole quota
/// can never pass.
#[tokio::test]
async fn uploads_charged_by_size_state_content_bytes() {
    let stores = Stores::start().await;
    for (at, store) in &stores.each {
        let limiter = Limiter::new(format!("cost_bytes_{at}"), Policy::fixed_window("1000/1h").unwrap(), store);
        let by_size = |request: &Request| request.headers().get("content-length")?.to_str().ok()?.parse().ok();
        let layer = RateLimitLayer::from_limiter(limiter.clone())
            .key(KeyBy::header("x-api-key").unwrap())
            .cost_by(by_size)
            .quota_unit(redlimit::http::QuotaUnit::ContentBytes);
        let mut app = app(layer);
        let upload = |bytes: &str| request("/", &[("x-api-key", "k"), ("content-length", bytes)]);
        let stored = send(&mut app, upload("600")).await;
        let policy = r#""1000/1h";q=1000;w=3600;qu="content-bytes""#;
        assert_eq!(header(&stored, "ratelimit-policy").as_deref(), Some(policy), "{at}");
        assert_eq!(header(&stored, "ratelimit").as_deref(), Some(r#""1000/1h";r=400;t=3600"#), "{at}");
        let denied = send(&mut app, upload("500")).await;
        assert_eq!((denied.status().as_u16(), header(&denied, "retry-after")), (429, Some("3600".into())), "{at}");
        assert_eq!(header(&denied, "ratelimit-policy").as_deref(), Some(policy), "{at}");
        assert_eq!(header(&denied, "ratelimit").as_deref(), Some(r#""1000/1h";r=400;t=3600"#), "{at}");
        let never = send(&mut app, upload("1001")).await;
        assert_eq!((never.status().as_u16(), header(&never, "retry-after")), (429, None), "{at}");
        assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 400, "{at}");
    }
}

/// The store down: `on_error` settles each request as at a fixed cost
/// (`allow` lets it through unstated and uncharged, `deny` answers 503,
/// `local` decides it at its own cost in memory).
#[cfg(feature = "redis")]
#[tokio::test]
async fn on_error_settles_a_computed_cost_as_a_fixed_one() {
    use redlimit::OnError;
    let mut server = redlimit_test_support::redis_server::RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap().with_clock(ManualClock::new());
    server.kill();
    let limiter = Limiter::new("cost_down", Policy::fixed_window("10/1m").unwrap(), &store);
    let mut allow = app(layer(&limiter.clone().with_on_error(OnError::Allow)));
    assert_eq!(ask(&mut allow, "/", "11").await, (200, -1, -1, None), "let through, nothing stated");
    let mut deny = app(layer(&limiter.clone().with_on_error(OnError::Deny)));
    assert_eq!(ask(&mut deny, "/", "3").await, (503, -1, -1, None));
    let mut local = app(layer(&limiter.with_on_error(OnError::Local)));
    assert_eq!(ask(&mut local, "/", "4").await, (200, 6, 60, None), "decided in memory at its cost");
    assert_eq!(ask(&mut local, "/", "7").await, (429, 6, 60, secs(60)));
}
