//! `RateLimitLayer::per_route`: one layer over a router gives every route
//! its own count by a default policy (keyed by the route axum matched, so a
//! path parameter does not split it), a stated route its own policy alone,
//! an exempt route nothing, and unmatched requests one count per client.
//! On a given store (memory and Redis, driven by one manual clock, and
//! counted there under the layer's name); and on the global store, whose
//! keys show the documented layout.

use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits};
use redlimit::policies::PolicySet;
use redlimit::{Limiter, ManualClock, Policy, Store};
use redlimit_test_support::http::{body, header, request, send};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn fixed(spec: &str) -> Policy {
    Policy::fixed_window(spec).unwrap()
}

/// `routes` counted on `store` under the limiter name `name`, keyed by `x-key`.
fn layer_on(store: &Store, name: &str, routes: RouteLimits) -> RateLimitLayer {
    RateLimitLayer::per_route_on(name, store, routes).unwrap().key(KeyBy::header("x-key").unwrap())
}

/// Routes `/a`, `/b` and `/users/{id}` behind `layer`; `served` counts the
/// requests that reached a handler.
fn app(layer: RateLimitLayer, served: &Arc<AtomicUsize>) -> Router {
    let served = served.clone();
    let ok = move || {
        served.fetch_add(1, Ordering::Relaxed);
        async { "ok" }
    };
    Router::new().route("/a", get(ok.clone())).route("/b", get(ok.clone())).route("/users/{id}", get(ok)).layer(layer)
}

/// `(status, RateLimit)` of `path` for client `key`.
async fn ask(app: &mut Router, path: &str, key: &str) -> (u16, Option<String>) {
    let response = send(app, request(path, &[("x-key", key)])).await;
    (response.status().as_u16(), header(&response, "ratelimit"))
}

fn state(r: u64) -> Option<String> {
    Some(format!(r#""2/1m";r={r};t=60"#))
}

/// What `limiter` has left for `key`.
async fn left(limiter: &Limiter, key: &str) -> u64 {
    limiter.peek(key, 0).await.unwrap().remaining
}

/// Two routes under a 2/1m default: each spends its own; a route's path
/// parameters share one count; a new window restores each.
async fn each_route_counts_alone(store: &Store, clock: &ManualClock, at: &str) {
    let served = Arc::new(AtomicUsize::new(0));
    let mut app = app(layer_on(store, "routes", RouteLimits::new(fixed("2/1m"))), &served);

    assert_eq!(ask(&mut app, "/a", "k").await, (200, state(1)), "{at}");
    assert_eq!(ask(&mut app, "/a", "k").await, (200, state(0)), "{at}");
    assert_eq!(ask(&mut app, "/a", "k").await, (429, state(0)), "{at}");
    assert_eq!(ask(&mut app, "/b", "k").await, (200, state(1)), "{at}: `/a` spent only its own");
    assert_eq!(ask(&mut app, "/a", "other").await, (200, state(1)), "{at}: and only its client's");
    // Counted on `store` under the layer's name: a limiter of that name there sees each count.
    let counts = Limiter::new("routes", fixed("2/1m"), store);
    let each = [left(&counts, "%2Fa|k").await, left(&counts, "%2Fb|k").await, left(&counts, "%2Fa|other").await];
    assert_eq!(each, [0, 1, 1], "{at}");

    assert_eq!(ask(&mut app, "/users/1", "k").await, (200, state(1)), "{at}");
    assert_eq!(ask(&mut app, "/users/2?page=3", "k").await, (200, state(0)), "{at}: the same route");
    assert_eq!(ask(&mut app, "/users/%31", "k").await, (429, state(0)), "{at}");
    assert_eq!(served.load(Ordering::Relaxed), 6, "{at}: a denied request never reaches the route");
    assert_eq!(left(&counts, "%2Fusers%2F%7Bid%7D|k").await, 0, "{at}");

    clock.advance(Duration::from_secs(60));
    assert_eq!(ask(&mut app, "/a", "k").await, (200, state(1)), "{at}");
    assert_eq!(ask(&mut app, "/users/9", "k").await, (200, state(1)), "{at}");
}

/// A stated route (configured as `search`, 3/1m, under a 1/1m default) is
/// limited by its policy alone, and says so: its fields and its 429's body
/// name `search`. A route nested under `/v1` is stated with its prefix.
async fn a_stated_route_has_its_policy_alone(store: &Store, at: &str) {
    let set =
        PolicySet::parse("p.toml", "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"3/1m\"\n").unwrap();
    let search = set.get("search").unwrap().clone();
    let routes = RouteLimits::new(fixed("1/1m")).route("/search", search.clone()).route("/v1/users/{id}", search);
    let ok = || async { "ok" };
    let v1 = Router::new().route("/users/{id}", get(ok));
    let router = Router::new().route("/search", get(ok)).route("/other", get(ok)).nest("/v1", v1);
    let mut app = router.layer(layer_on(store, "stated", routes));

    for left in (0..3).rev() {
        let response = send(&mut app, request("/search", &[("x-key", "k")])).await;
        assert_eq!(response.status(), 200, "{at}: the default (1/1m) does not apply too");
        assert_eq!(header(&response, "ratelimit-policy").unwrap(), r#""search";q=3;w=60"#, "{at}");
        assert_eq!(header(&response, "ratelimit").unwrap(), format!(r#""search";r={left};t=60"#), "{at}");
    }
    let denied = send(&mut app, request("/search", &[("x-key", "k")])).await;
    assert_eq!(denied.status(), 429, "{at}");
    assert_eq!(header(&denied, "ratelimit-policy").unwrap(), r#""search";q=3;w=60"#, "{at}");
    assert!(body(denied).await.contains(r#""violated-policies":["search"]"#), "{at}");

    assert_eq!(ask(&mut app, "/other", "k").await, (200, Some(r#""1/1m";r=0;t=60"#.into())), "{at}");
    let nested = send(&mut app, request("/v1/users/7", &[("x-key", "k")])).await;
    assert_eq!(header(&nested, "ratelimit").unwrap(), r#""search";r=2;t=60"#, "{at}: its own count");
}

#[tokio::test]
async fn each_route_counts_alone_on_the_memory_store() {
    let clock = ManualClock::new();
    each_route_counts_alone(&Store::memory().with_clock(clock.clone()), &clock, "memory").await;
}

#[tokio::test]
async fn a_stated_route_has_its_policy_alone_on_the_memory_store() {
    a_stated_route_has_its_policy_alone(&Store::memory().with_clock(ManualClock::new()), "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn each_route_counts_alone_and_a_stated_route_has_its_policy_alone_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    each_route_counts_alone(&stores.redis, &stores.clock, "redis").await;
    a_stated_route_has_its_policy_alone(&stores.redis, "redis").await;
}

/// The layer's `on_error` settles a store that cannot answer, on a stated
/// route as on the default's: the layer builds its limiter, so none brings its own.
#[cfg(feature = "redis")]
#[tokio::test]
async fn a_store_that_is_down_is_a_503_under_deny_and_passes_under_allow() {
    let mut server = redlimit_test_support::redis_server::RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    server.kill();
    let served = Arc::new(AtomicUsize::new(0));
    let routes = || RouteLimits::new(fixed("5/1m")).route("/b", fixed("1/1m"));

    let mut deny = app(layer_on(&store, "down", routes()).on_error(redlimit::OnError::Deny), &served);
    assert_eq!(ask(&mut deny, "/a", "k").await, (503, None));
    assert_eq!(ask(&mut deny, "/b", "k").await, (503, None), "a stated route too");
    let mut allow = app(layer_on(&store, "down", routes()).on_error(redlimit::OnError::Allow), &served);
    assert_eq!(ask(&mut allow, "/a", "k").await, (200, None));
    assert_eq!(ask(&mut allow, "/b", "k").await, (200, None));
    assert_eq!(served.load(Ordering::Relaxed), 2);
}

/// A route with its own `RateLimitLayer`, exempted from the defaults, is
/// limited by that layer alone: its fields are that layer's only.
#[tokio::test]
async fn a_route_with_its_own_layer_is_limited_by_it_alone_when_exempted_here() {
    let store = Store::memory().with_clock(ManualClock::new());
    let own = RateLimitLayer::from_limiter(Limiter::new("upload", fixed("3/1m"), &store))
        .key(KeyBy::header("x-key").unwrap());
    let routes = RouteLimits::new(fixed("1/1m")).exempt("/upload");
    let mut app = Router::new()
        .route("/upload", get(|| async { "stored" }).layer(own))
        .route("/a", get(|| async { "a" }))
        .layer(layer_on(&store, "defaults", routes));

    for left in (0..3).rev() {
        assert_eq!(ask(&mut app, "/upload", "k").await, (200, Some(format!(r#""3/1m";r={left};t=60"#))));
    }
    assert_eq!(ask(&mut app, "/upload", "k").await, (429, Some(r#""3/1m";r=0;t=60"#.into())));
    assert_eq!(ask(&mut app, "/a", "k").await, (200, Some(r#""1/1m";r=0;t=60"#.into())));
}

#[tokio::test]
async fn an_exempt_route_is_never_limited_nor_asked_for_a_key() {
    let store = Store::memory().with_clock(ManualClock::new());
    let served = Arc::new(AtomicUsize::new(0));
    let routes = RouteLimits::new(fixed("1/1m")).exempt("/users/{id}");
    let mut app = app(layer_on(&store, "exempt", routes), &served);

    for id in 0..5 {
        let response = send(&mut app, request(&format!("/users/{id}"), &[])).await;
        assert_eq!((response.status().as_u16(), header(&response, "ratelimit")), (200, None));
    }
    assert_eq!(served.load(Ordering::Relaxed), 5);
    assert_eq!(ask(&mut app, "/a", "k").await.0, 200);
    assert_eq!(ask(&mut app, "/a", "k").await.0, 429, "the other routes are still limited");
    assert_eq!(send(&mut app, request("/a", &[])).await.status(), 400, "and still need a key");
}

/// Requests no route matched (the default 404, a fallback, a nested service) share one count
/// per client by the default policy, apart from every route's; with
/// `exempt_unmatched` they pass uncounted.
#[tokio::test]
async fn unmatched_requests_share_one_count_per_client_unless_exempt() {
    let store = Store::memory().with_clock(ManualClock::new());
    let served = Arc::new(AtomicUsize::new(0));
    let mut site = app(layer_on(&store, "unmatched", RouteLimits::new(fixed("2/1m"))), &served);
    assert_eq!(ask(&mut site, "/nothing", "k").await, (404, state(1)));
    assert_eq!(ask(&mut site, "/users", "k").await, (404, state(0)));
    assert_eq!(ask(&mut site, "/elsewhere/entirely", "k").await, (429, state(0)));
    assert_eq!(ask(&mut site, "/nothing", "other").await, (404, state(1)), "each client its own");
    assert_eq!(ask(&mut site, "/a", "k").await, (200, state(1)), "and apart from every route");

    let fallback = Router::new()
        .route("/a", get(|| async { "a" }))
        .nest_service("/static", get(|| async { "a file" }))
        .fallback(|| async { "a page" });
    let mut pages = fallback.layer(layer_on(&store, "fallback", RouteLimits::new(fixed("2/1m"))));
    assert_eq!(ask(&mut pages, "/index.html", "k").await.0, 200);
    assert_eq!(ask(&mut pages, "/static/app.js", "k").await.0, 200);
    let denied = (ask(&mut pages, "/about.html", "k").await.0, ask(&mut pages, "/static/app.css", "k").await.0);
    assert_eq!(denied, (429, 429), "a fallback and a nested service are limited too, as unmatched");

    let exempt = RouteLimits::new(fixed("1/1m")).exempt_unmatched();
    let mut open = app(layer_on(&store, "unmatched_exempt", exempt), &served);
    for _ in 0..3 {
        assert_eq!(ask(&mut open, "/nothing", "k").await, (404, None));
    }
    assert_eq!(ask(&mut open, "/a", "k").await.0, 200);
    assert_eq!(ask(&mut open, "/a", "k").await.0, 429);
}

/// A key is the escaped route, `|`, then the client's key, so a client key
/// holding `|` cannot reach another route's count, nor the unmatched one.
#[tokio::test]
async fn a_crafted_client_key_cannot_reach_another_routes_count() {
    let store = Store::memory().with_clock(ManualClock::new());
    let ok = || async { "ok" };
    let router = Router::new().route("/p", get(ok)).route("/p|q", get(ok));
    let mut app = router.layer(layer_on(&store, "crafted", RouteLimits::new(fixed("1/1m"))));

    assert_eq!(ask(&mut app, "/p|q", "k").await.0, 200);
    assert_eq!(ask(&mut app, "/p|q", "k").await.0, 429);
    // Joined unescaped, `/p` + `q|k` would be `/p|q` + `k`.
    assert_eq!(ask(&mut app, "/p", "q|k").await.0, 200);
    assert_eq!(ask(&mut app, "/nowhere", "/p|q|k").await.0, 404, "nor does an unmatched request");
}

#[test]
fn routes_stated_wrong_are_errors_naming_them() {
    let error = |routes: RouteLimits| RateLimitLayer::per_route("api", routes).err().unwrap().to_string();
    let twice = error(RouteLimits::new(fixed("1/1m")).route("/a", fixed("2/1m")).exempt("/a"));
    assert_eq!(twice, "the routes of `api`: route `/a` is stated twice");
    let relative = error(RouteLimits::new(fixed("1/1m")).route("search", fixed("2/1m")));
    assert!(relative.contains("`search` is no route's path"), "{relative}");
}

/// On the global store (set once here: the only test of this binary that
/// uses it), under the layer's name, with the keys the HTTP guide documents.
#[tokio::test]
async fn on_the_global_store_keys_are_the_escaped_route_then_the_client_key() {
    let clock = ManualClock::new();
    redlimit::init(Store::memory().with_clock(clock.clone())).unwrap();
    let layer = RateLimitLayer::per_route("pages", RouteLimits::new(fixed("5/1m"))).unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    let mut app = app(layer.key(KeyBy::header("x-key").unwrap()), &served);
    ask(&mut app, "/users/1", "ann").await;
    ask(&mut app, "/users/2", "ann").await;
    ask(&mut app, "/nothing", "ann").await;

    let limiter = Limiter::new("pages", fixed("5/1m"), redlimit::global().await.unwrap());
    assert_eq!(limiter.peek("%2Fusers%2F%7Bid%7D|ann", 0).await.unwrap().remaining, 3);
    assert_eq!(limiter.peek("|ann", 0).await.unwrap().remaining, 4, "unmatched");
    assert_eq!(limiter.peek("ann", 0).await.unwrap().remaining, 5);
}
