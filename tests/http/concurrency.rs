//! `RateLimitLayer` under a concurrency policy: a request holds a permit
//! while the route handles it, so with two in flight a third is a 429 that
//! states requests in flight (`qu="concurrent-requests"`, no `w`, no `t`, no
//! `Retry-After`); one done lets the next through, and a request dropped
//! unfinished (its future aborted, its client gone) gives its permit back.
//! Tiers and routes mixing it with rates state each in its own terms, and
//! `on_error` settles a store that is down. On the memory store and on Redis.
//!
//! The route waits until the test finishes each request, by name: nothing
//! here waits on the clock for its outcome.

use axum::extract::Request;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits, TierBy, Tiers};
use redlimit::{Limiter, Permit, Policy, Store};
use redlimit_test_support::http::{body, header, list_items, request, send};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tower_service::Service;

/// Only a guard against a test that would hang: no outcome depends on it.
const HANG: Duration = Duration::from_secs(30);

type Gates = Arc<Mutex<HashMap<String, Arc<Semaphore>>>>;

/// The route's side the test drives: which requests it started, and
/// letting each one finish.
struct Route {
    started: mpsc::UnboundedReceiver<String>,
    gates: Gates,
}

fn gate(gates: &Gates, job: &str) -> Arc<Semaphore> {
    gates.lock().unwrap().entry(job.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(0))).clone()
}

impl Route {
    /// The job of the next request the route started.
    async fn started(&mut self) -> String {
        tokio::time::timeout(HANG, self.started.recv()).await.expect("a request reaches the route").unwrap()
    }

    /// Lets the request of `job` finish.
    fn finish(&self, job: &str) {
        gate(&self.gates, job).add_permits(1);
    }

    fn none_started(&mut self) -> bool {
        self.started.try_recv().is_err()
    }
}

/// `layer` around a route that, for a request of job `x-job`, says it
/// started and answers the job's name once the test finishes it.
fn app(layer: RateLimitLayer) -> (Router, Route) {
    let (tell, started) = mpsc::unbounded_channel();
    let gates = Gates::default();
    let handler = {
        let gates = gates.clone();
        move |request: Request| {
            let job = request.headers()["x-job"].to_str().unwrap().to_owned();
            let (tell, gate) = (tell.clone(), gate(&gates, &job));
            async move {
                tell.send(job.clone()).unwrap();
                gate.acquire().await.unwrap().forget();
                job
            }
        }
    };
    let router = Router::new().route("/", get(handler.clone())).route("/export", get(handler));
    (router.layer(layer), Route { started, gates })
}

fn job(name: &str) -> Request {
    request("/", &[("x-api-key", "k"), ("x-job", name)])
}

fn export(name: &str) -> Request {
    request("/export", &[("x-api-key", "k"), ("x-job", name)])
}

/// Job `name` in flight, on a task of its own.
fn spawn(app: &Router, name: &str) -> JoinHandle<Response> {
    spawn_request(app, job(name))
}

fn spawn_request(app: &Router, request: Request) -> JoinHandle<Response> {
    let mut app = app.clone();
    tokio::spawn(async move { app.call(request).await.unwrap() })
}

/// The response to `request`, which is expected never to reach the route.
async fn refused(app: &Router, request: Request) -> Response {
    let call = app.clone().call(request);
    tokio::time::timeout(HANG, call).await.expect("answered without the route").unwrap()
}

async fn done(handle: JoinHandle<Response>) -> Response {
    tokio::time::timeout(HANG, handle).await.expect("the request ends").unwrap()
}

/// A list field's items: each name with its parameters in order.
fn items(response: &Response, field: &str) -> Vec<(String, Vec<(String, String)>)> {
    list_items(response.headers(), field)
}

fn expected(name: &str, params: &[(&str, &str)]) -> Vec<(String, Vec<(String, String)>)> {
    vec![(name.to_owned(), params.iter().map(|&(k, v)| (k.to_owned(), v.to_owned())).collect())]
}

/// `RateLimit-Policy` of a concurrency limit of 2: requests in flight, no window.
fn two_at_once() -> Vec<(String, Vec<(String, String)>)> {
    expected("concurrency 2", &[("q", "2"), ("qu", r#""concurrent-requests""#)])
}

fn left(r: &str) -> Vec<(String, Vec<(String, String)>)> {
    expected("concurrency 2", &[("r", r)])
}

fn layer(limiter: &Limiter) -> RateLimitLayer {
    RateLimitLayer::from_limiter(limiter.clone()).key(KeyBy::header("x-api-key").unwrap())
}

fn exports(store: &Store, at: &str) -> Limiter {
    Limiter::new(format!("exports_{at}"), Policy::concurrency(2, "30s").unwrap(), store)
}

async fn two_in_flight_deny_a_third_until_one_is_done(store: &Store, at: &str) {
    let (app, mut route) = app(layer(&exports(store, at)));
    let a = spawn(&app, "a");
    assert_eq!(route.started().await, "a", "{at}");
    let b = spawn(&app, "b");
    assert_eq!(route.started().await, "b", "{at}");

    let denied = refused(&app, job("c")).await;
    assert_eq!(denied.status(), 429, "{at}");
    assert_eq!(items(&denied, "ratelimit-policy"), two_at_once(), "{at}: no w");
    assert_eq!(items(&denied, "ratelimit"), left("0"), "{at}: no t");
    assert_eq!(header(&denied, "retry-after"), None, "{at}: a permit frees when a request ends");
    let text = body(denied).await;
    assert!(text.contains(r#""violated-policies":["concurrency 2"]"#), "{at}: {text}");
    assert!(text.contains("retry once a request in flight is done") && !text.contains("retry_after"), "{at}: {text}");
    assert!(route.none_started(), "{at}: a denied request never reaches the route");

    route.finish("a");
    let a = done(a).await;
    assert_eq!(a.status(), 200, "{at}");
    assert_eq!((items(&a, "ratelimit-policy"), items(&a, "ratelimit")), (two_at_once(), left("1")), "{at}");
    // A's permit was back before its body's end: the next request is let in.
    assert_eq!(body(a).await, "a", "{at}");
    let d = spawn(&app, "d");
    assert_eq!(route.started().await, "d", "{at}");
    assert_eq!(refused(&app, job("e")).await.status(), 429, "{at}: b and d in flight");

    route.finish("b");
    route.finish("d");
    for handle in [b, d] {
        let response = done(handle).await;
        assert_eq!((response.status().as_u16(), items(&response, "ratelimit")), (200, left("0")), "{at}");
        body(response).await;
    }
    // Every permit is back: two at once again.
    let (f, g) = (spawn(&app, "f"), spawn(&app, "g"));
    let mut started = [route.started().await, route.started().await];
    started.sort();
    assert_eq!(started, ["f", "g"], "{at}");
    route.finish("f");
    route.finish("g");
    assert_eq!((done(f).await.status().as_u16(), done(g).await.status().as_u16()), (200, 200), "{at}");
}

async fn a_request_dropped_unfinished_gives_its_permit_back(store: &Store, at: &str) {
    let limiter = exports(store, at);
    let (app, mut route) = app(layer(&limiter));
    let a = spawn(&app, "a");
    assert_eq!(route.started().await, "a", "{at}");
    let b = spawn(&app, "b");
    assert_eq!(route.started().await, "b", "{at}");

    // The response future is dropped mid-route, as a timeout layer or a
    // server whose client went away drops it.
    a.abort();
    assert!(done_or_cancelled(a).await, "{at}");
    // Given back on a task of its own when the store is remote: a waiter in
    // this process is woken when it is.
    let freed = limiter.acquire_wait("k", Some(HANG)).await.expect("the dropped request's permit comes back");
    freed.release().await.unwrap();

    let c = spawn(&app, "c");
    assert_eq!(route.started().await, "c", "{at}");
    assert_eq!(refused(&app, job("d")).await.status(), 429, "{at}: b and c in flight");
    route.finish("b");
    route.finish("c");
    assert_eq!((done(b).await.status().as_u16(), done(c).await.status().as_u16()), (200, 200), "{at}");
}

async fn done_or_cancelled(handle: JoinHandle<Response>) -> bool {
    tokio::time::timeout(HANG, handle).await.expect("the task ends").unwrap_err().is_cancelled()
}

#[tokio::test]
async fn two_in_flight_deny_a_third_until_one_is_done_on_the_memory_store() {
    two_in_flight_deny_a_third_until_one_is_done(&Store::memory(), "memory").await;
}

#[tokio::test]
async fn a_request_dropped_unfinished_gives_its_permit_back_on_the_memory_store() {
    a_request_dropped_unfinished_gives_its_permit_back(&Store::memory(), "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn two_in_flight_deny_a_third_until_one_is_done_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    two_in_flight_deny_a_third_until_one_is_done(&stores.redis, "redis").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_request_dropped_unfinished_gives_its_permit_back_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    a_request_dropped_unfinished_gives_its_permit_back(&stores.redis, "redis").await;
}

/// Tiers of two kinds in one layer: each response states its own tier's
/// policy in that policy's terms, and only the concurrency tier holds
/// permits.
async fn a_tiered_layer_states_each_tier_in_its_own_terms(store: &Store, at: &str) {
    let tiers = Tiers::new(TierBy::header("x-plan").unwrap())
        .tier_limiter("free", Limiter::new(format!("api_{at}.free"), Policy::fixed_window("2/1h").unwrap(), store))
        .tier_limiter("batch", Limiter::new(format!("api_{at}.batch"), Policy::concurrency(1, "30s").unwrap(), store));
    let layer = RateLimitLayer::tiered("api", tiers).unwrap().key(KeyBy::header("x-api-key").unwrap());
    let (app, mut route) = app(layer);
    let on = |plan: &str, name: &str| {
        let mut request = job(name);
        request.headers_mut().insert("x-plan", plan.parse().unwrap());
        request
    };

    let batch = spawn_request(&app, on("batch", "long"));
    assert_eq!(route.started().await, "long", "{at}");
    let busy = refused(&app, on("batch", "next")).await;
    assert_eq!(busy.status(), 429, "{at}");
    let one_at_once = expected("concurrency 1", &[("q", "1"), ("qu", r#""concurrent-requests""#)]);
    assert_eq!(items(&busy, "ratelimit-policy"), one_at_once, "{at}");
    assert_eq!(items(&busy, "ratelimit"), expected("concurrency 1", &[("r", "0")]), "{at}");

    // The free tier counts a rate, in flight or not: its own w and t.
    let free = spawn_request(&app, on("free", "quick"));
    assert_eq!(route.started().await, "quick", "{at}");
    route.finish("quick");
    let free = done(free).await;
    assert_eq!(free.status(), 200, "{at}");
    assert_eq!(items(&free, "ratelimit-policy"), expected("2/1h", &[("q", "2"), ("w", "3600")]), "{at}");
    assert_eq!(items(&free, "ratelimit"), expected("2/1h", &[("r", "1"), ("t", "3600")]), "{at}");

    route.finish("long");
    let batch = done(batch).await;
    assert_eq!((batch.status().as_u16(), items(&batch, "ratelimit-policy")), (200, one_at_once), "{at}");
    assert_eq!(body(batch).await, "long", "{at}");
}

#[tokio::test]
async fn a_tiered_layer_states_each_tier_in_its_own_terms_on_the_memory_store() {
    let store = Store::memory().with_clock(redlimit::ManualClock::new());
    a_tiered_layer_states_each_tier_in_its_own_terms(&store, "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_tiered_layer_states_each_tier_in_its_own_terms_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    a_tiered_layer_states_each_tier_in_its_own_terms(&stores.redis, "redis").await;
}

/// One per-route layer, one limiter: a route limited by concurrency holds
/// permits, the routes of the rate default count calls, each stated in its
/// own terms.
async fn a_per_route_layer_mixes_a_concurrency_route_with_rate_routes(store: &Store, at: &str) {
    let routes = RouteLimits::new(Policy::fixed_window("5/1h").unwrap())
        .route("/export", Policy::concurrency(1, "30s").unwrap());
    let layer = RateLimitLayer::per_route_on(format!("routes_{at}"), store, routes)
        .unwrap()
        .key(KeyBy::header("x-api-key").unwrap());
    let (app, mut route) = app(layer);

    let long = spawn_request(&app, export("long"));
    assert_eq!(route.started().await, "long", "{at}");
    let busy = refused(&app, export("next")).await;
    assert_eq!(busy.status(), 429, "{at}");
    let one_at_once = expected("concurrency 1", &[("q", "1"), ("qu", r#""concurrent-requests""#)]);
    assert_eq!((items(&busy, "ratelimit-policy"), header(&busy, "retry-after")), (one_at_once, None), "{at}");

    let quick = spawn(&app, "quick");
    assert_eq!(route.started().await, "quick", "{at}: another route, another policy");
    route.finish("quick");
    let quick = done(quick).await;
    assert_eq!(items(&quick, "ratelimit"), expected("5/1h", &[("r", "4"), ("t", "3600")]), "{at}");

    route.finish("long");
    let long = done(long).await;
    assert_eq!(long.status(), 200, "{at}");
    assert_eq!(body(long).await, "long", "{at}: its permit is given back with its body's end");
    let again = spawn_request(&app, export("again"));
    assert_eq!(route.started().await, "again", "{at}: the export's permit is back");
    route.finish("again");
    assert_eq!(items(&done(again).await, "ratelimit"), expected("concurrency 1", &[("r", "0")]), "{at}");
}

#[tokio::test]
async fn a_per_route_layer_mixes_a_concurrency_route_with_rate_routes_on_the_memory_store() {
    let store = Store::memory().with_clock(redlimit::ManualClock::new());
    a_per_route_layer_mixes_a_concurrency_route_with_rate_routes(&store, "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_per_route_layer_mixes_a_concurrency_route_with_rate_routes_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    a_per_route_layer_mixes_a_concurrency_route_with_rate_routes(&stores.redis, "redis").await;
}

/// A client that hangs up mid-request: the server drops the route's
/// future, and the permit comes back (a waiter on the limiter is woken).
#[tokio::test]
async fn a_client_that_hangs_up_gives_its_permit_back() {
    use tokio::io::AsyncWriteExt;
    let limiter = Limiter::new("uploads", Policy::concurrency(1, "30s").unwrap(), &Store::memory());
    let (app, mut route) = app(layer(&limiter));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
    client.write_all(b"GET / HTTP/1.1\r\nhost: test\r\nx-api-key: k\r\nx-job: gone\r\n\r\n").await.unwrap();
    assert_eq!(route.started().await, "gone");
    assert!(limiter.acquire("k").await.is_err(), "held while the route runs");
    drop(client);
    let freed = limiter.acquire_wait("k", Some(HANG)).await.expect("given back when the client hung up");
    assert!(freed.is_held());
}

/// The store down: `on_error` settles a concurrency layer as any other.
#[cfg(feature = "redis")]
#[tokio::test]
async fn a_store_that_is_down_is_settled_by_on_error() {
    use redlimit::OnError;
    let mut server = redlimit_test_support::redis_server::RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    server.kill();
    let limiter = Limiter::new("down", Policy::concurrency(1, "30s").unwrap(), &store);

    let (deny, _route) = app(layer(&limiter.clone().with_on_error(OnError::Deny)));
    let unavailable = refused(&deny, job("a")).await;
    assert_eq!((unavailable.status().as_u16(), header(&unavailable, "ratelimit")), (503, None));

    // Let through with nothing held and nothing stated: two at once pass.
    let (allow, mut route) = app(layer(&limiter.clone().with_on_error(OnError::Allow)));
    let (a, b) = (spawn(&allow, "a"), spawn(&allow, "b"));
    let mut started = [route.started().await, route.started().await];
    started.sort();
    assert_eq!(started, ["a", "b"]);
    route.finish("a");
    route.finish("b");
    for handle in [a, b] {
        let response = done(handle).await;
        assert_eq!((response.status().as_u16(), header(&response, "ratelimit")), (200, None));
    }

    // Counted in this process instead: one at once still.
    let (local, mut route) = app(layer(&limiter.with_on_error(OnError::Local)));
    let a = spawn(&local, "a");
    assert_eq!(route.started().await, "a");
    assert_eq!(refused(&local, job("b")).await.status(), 429);
    route.finish("a");
    let a = done(a).await;
    assert_eq!((a.status().as_u16(), body(a).await.as_str()), (200, "a"));
    let c = spawn(&local, "c");
    assert_eq!(route.started().await, "c", "a's local permit is back");
    route.finish("c");
    assert_eq!(done(c).await.status(), 200);
}

/// Where the test sends each streamed body's chunks, by job.
type Bodies = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<&'static str>>>>;

/// A route that streams its body: each request's chunks come from the
/// test (by `x-job`), and the body ends when the test closes them.
fn streaming(layer: RateLimitLayer) -> (Router, Bodies) {
    let senders = Bodies::default();
    let handler = {
        let senders = senders.clone();
        move |request: Request| {
            let job = request.headers()["x-job"].to_str().unwrap().to_owned();
            let (send, chunks) = mpsc::unbounded_channel::<&'static str>();
            senders.lock().unwrap().insert(job, send);
            let stream = futures_util::stream::unfold(chunks, |mut chunks| async move {
                Some((Ok::<_, std::convert::Infallible>(chunks.recv().await?), chunks))
            });
            std::future::ready(axum::body::Body::from_stream(stream))
        }
    };
    (Router::new().route("/", get(handler)).layer(layer), senders)
}

/// A streamed response counts as in flight until its body is sent: its
/// permit comes back with the body's end (before the last frame is handed
/// on), or when the body is dropped unsent.
async fn a_streamed_body_holds_its_permit_until_sent(store: &Store, at: &str) {
    let limiter = exports(store, at);
    let (app, senders) = streaming(layer(&limiter));
    let a = send(&mut app.clone(), job("a")).await;
    let b = send(&mut app.clone(), job("b")).await;
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200), "{at}: both bodies still to send");
    assert_eq!(send(&mut app.clone(), job("c")).await.status(), 429, "{at}: two bodies in flight hold both permits");

    // A's body sent to its end: its permit is back before the body ends.
    let send_a = senders.lock().unwrap().remove("a").unwrap();
    send_a.send("part one, ").unwrap();
    send_a.send("part two").unwrap();
    drop(send_a);
    assert_eq!(body(a).await, "part one, part two", "{at}");
    let d = send(&mut app.clone(), job("d")).await;
    assert_eq!(d.status(), 200, "{at}: a's permit came back with its body's end");
    assert_eq!(send(&mut app.clone(), job("e")).await.status(), 429, "{at}: b and d in flight");

    // Bodies dropped unsent (a client gone mid-body): their permits come back.
    drop((b, d));
    let mut freed = Vec::new();
    for _ in 0..2 {
        freed.push(limiter.acquire_wait("k", Some(HANG)).await.expect("a dropped body's permit comes back"));
    }
    assert!(freed.iter().all(Permit::is_held), "{at}");
}

#[tokio::test]
async fn a_streamed_body_holds_its_permit_until_sent_on_the_memory_store() {
    a_streamed_body_holds_its_permit_until_sent(&Store::memory(), "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_streamed_body_holds_its_permit_until_sent_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    a_streamed_body_holds_its_permit_until_sent(&stores.redis, "redis").await;
}
