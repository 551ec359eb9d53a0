//! `RateLimitLayer::per_request`: a layer before it (standing for
//! authentication) puts each user's plan in a request extension, and the
//! rate limit applies that user's own policy: its 429s, and `RateLimit-Policy`
//! and `RateLimit` naming that policy (read back with a structured-fields
//! parser). A plan changed mid-window keeps the user's count. On the memory
//! store and on Redis, driven by one manual clock; and on the global store.

use axum::extract::Request;
use axum::middleware;
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::policies::PolicySet;
use redlimit::{Limiter, ManualClock, Policy, Store};
use redlimit_test_support::http::{body, header, integer_items, request, send};
use redlimit_test_support::log_capture::LogCapture;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The plans, named as configured: a policy's name names its header items.
fn plans() -> (Arc<Policy>, Arc<Policy>) {
    let set = PolicySet::parse(
        "plans.toml",
        "[policies.free]\nalgo = \"fixed_window\"\nstrategies = \"2/1m\"\n\n[policies.pro]\nalgo = \"fixed_window\"\nstrategies = \"5/1m\"\n",
    )
    .unwrap();
    (Arc::new(set.get("free").unwrap().clone()), Arc::new(set.get("pro").unwrap().clone()))
}

/// What authentication found out: the caller's plan.
#[derive(Clone)]
struct Plan(Arc<Policy>);

/// Each user's plan, changed by the tests as an account would be.
type Accounts = Arc<Mutex<HashMap<&'static str, Arc<Policy>>>>;

/// The route behind `limit`, behind an authentication layer that puts the
/// plan of the user named by `x-user` in an extension (none for no user).
fn app(limit: RateLimitLayer, accounts: &Accounts, served: &Arc<AtomicUsize>) -> Router {
    let accounts = accounts.clone();
    let authenticate = middleware::map_request(move |mut request: Request| {
        let user = request.headers().get("x-user").and_then(|user| user.to_str().ok());
        let plan = user.and_then(|user| accounts.lock().unwrap().get(user).cloned());
        if let Some(plan) = plan {
            request.extensions_mut().insert(Plan(plan));
        }
        async move { request }
    });
    let served = served.clone();
    let handler = move || {
        served.fetch_add(1, Ordering::Relaxed);
        async { "ok" }
    };
    // The layer added last runs first: authentication, then the limit.
    Router::new().route("/", get(handler)).layer(limit).layer(authenticate)
}

fn plan_of(request: &Request) -> Option<Arc<Policy>> {
    request.extensions().get::<Plan>().map(|plan| plan.0.clone())
}

/// `(status, RateLimit-Policy (name, q, w), RateLimit (name, r, t))` of `user`'s next request.
async fn ask(app: &mut Router, user: &str) -> (u16, (String, i64, i64), (String, i64, i64)) {
    let response = send(app, request("/", &[("x-user", user)])).await;
    let [policy] = <[_; 1]>::try_from(integer_items(response.headers(), "ratelimit-policy", ["q", "w"])).unwrap();
    let [state] = <[_; 1]>::try_from(integer_items(response.headers(), "ratelimit", ["r", "t"])).unwrap();
    (response.status().as_u16(), policy, state)
}

fn item(name: &str, a: i64, b: i64) -> (String, i64, i64) {
    (name.to_owned(), a, b)
}

/// Ann on the free plan, Bob on pro, through one layer: each gets their own
/// limit and fields, and a plan change keeps the count of the current window.
async fn two_users_two_plans(limit: RateLimitLayer, clock: &ManualClock, at: &str) {
    let (free, pro) = plans();
    let accounts: Accounts = Arc::new(Mutex::new(HashMap::from([("ann", free.clone()), ("bob", pro.clone())])));
    let served = Arc::new(AtomicUsize::new(0));
    let mut app = app(limit, &accounts, &served);

    assert_eq!(ask(&mut app, "ann").await, (200, item("free", 2, 60), item("free", 1, 60)), "{at}");
    assert_eq!(ask(&mut app, "ann").await, (200, item("free", 2, 60), item("free", 0, 60)), "{at}");
    assert_eq!(ask(&mut app, "ann").await, (429, item("free", 2, 60), item("free", 0, 60)), "{at}");
    for left in (0..5).rev() {
        assert_eq!(ask(&mut app, "bob").await, (200, item("pro", 5, 60), item("pro", left, 60)), "{at}");
    }
    let denied = send(&mut app, request("/", &[("x-user", "bob")])).await;
    assert_eq!((denied.status().as_u16(), header(&denied, "retry-after").as_deref()), (429, Some("60")), "{at}");
    assert_eq!(served.load(Ordering::Relaxed), 7, "{at}: a denied request never reaches the route");

    // Ann upgrades mid-window: her 2 requests still count under pro.
    accounts.lock().unwrap().insert("ann", pro.clone());
    assert_eq!(ask(&mut app, "ann").await, (200, item("pro", 5, 60), item("pro", 2, 60)), "{at}");
    // Bob downgrades with 5 used: denied at once, and told the free plan's numbers.
    accounts.lock().unwrap().insert("bob", free.clone());
    assert_eq!(ask(&mut app, "bob").await, (429, item("free", 2, 60), item("free", 0, 60)), "{at}");

    // A new window: each counts afresh under the plan they have now.
    clock.advance(Duration::from_secs(60));
    assert_eq!(ask(&mut app, "ann").await, (200, item("pro", 5, 60), item("pro", 4, 60)), "{at}");
    assert_eq!(ask(&mut app, "bob").await, (200, item("free", 2, 60), item("free", 1, 60)), "{at}");
}

#[tokio::test]
async fn each_user_gets_their_own_plan_on_the_memory_store() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    let limit = RateLimitLayer::per_request_on("plans", &store, plan_of).key(KeyBy::header("x-user").unwrap());
    two_users_two_plans(limit, &clock, "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn each_user_gets_their_own_plan_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    let limit = RateLimitLayer::per_request_on("plans", &stores.redis, plan_of).key(KeyBy::header("x-user").unwrap());
    two_users_two_plans(limit, &stores.clock, "redis").await;
}

/// On the global store (set once here: the only test of this binary that uses it).
#[tokio::test]
async fn on_the_global_store_counts_under_the_layer_name_and_a_request_without_a_plan_is_a_500() {
    let clock = ManualClock::new();
    redlimit::init(Store::memory().with_clock(clock.clone())).unwrap();
    let limit = RateLimitLayer::per_request("plans", plan_of).key(KeyBy::header("x-user").unwrap());
    two_users_two_plans(limit.clone(), &clock, "global").await;
    let (_, pro) = plans();
    let global = redlimit::global().await.unwrap();
    let ann = Limiter::new("plans", Policy::clone(&pro), global).peek("ann", 0).await.unwrap();
    assert_eq!(ann.remaining, 4, "the layer's limiter is named as the layer");

    // Carol has no account: authentication sets no plan, so the server is set up wrong for her.
    let logs = LogCapture::default();
    let _logs = logs.install();
    let accounts: Accounts = Arc::default();
    let served = Arc::new(AtomicUsize::new(0));
    let mut app = app(limit, &accounts, &served);
    for _ in 0..2 {
        let response = send(&mut app, request("/", &[("x-user", "carol")])).await;
        assert_eq!((response.status().as_u16(), header(&response, "ratelimit")), (500, None));
        assert_eq!(body(response).await, r#"{"type":"about:blank","title":"Internal Server Error","status":500}"#);
    }
    assert_eq!(served.load(Ordering::Relaxed), 0, "the route is not called");
    let text = logs.text();
    assert_eq!(text.matches("ERROR").count(), 1, "said once: {text}");
    assert!(text.contains("the policy function of rate limiter `plans` gave no policy for a request"), "{text}");
}
