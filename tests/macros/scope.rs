//! `redlimit::scope`: each test gives the annotated functions and layers it
//! calls a store of its own, with its own `ManualClock`, in one test binary
//! (the global store can be set only once per process). The two tests below
//! drive the same `#[rate_limit]` function at the same time (each waits a
//! little for the other to start) and each sees only its own counts. A
//! server's requests, each in its connection's own task, and the tasks they
//! spawn reach the test's store through `http::ScopeLayer` and
//! `redlimit::in_current_scope`.

use axum::{body::Body, extract::Request, routing::get, Router};
use redlimit::http::{KeyBy, RateLimitLayer, ScopeLayer};
use redlimit::{rate_limit, Limiter, ManualClock, Policy, RateLimited, Store};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tower_service::Service;

#[rate_limit(name = "scoped.search", algo = "fixed_window", strategies = "3/1m", key = "<user>")]
async fn search(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

/// Both tests have started (or the other did not come within a second:
/// the tests run one at a time, and each still checks its own counts).
fn meet() {
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    STARTED.fetch_add(1, Ordering::SeqCst);
    let since = Instant::now();
    while STARTED.load(Ordering::SeqCst) < 2 && since.elapsed() < Duration::from_secs(1) {
        std::thread::yield_now();
    }
}

/// Ann's calls on a scope's own store: 3 a minute, then a new minute on its own clock.
async fn three_a_minute(clock: &ManualClock) {
    for round in 0..3 {
        for call in 0..5 {
            let passed = search("ann").await.is_ok();
            assert_eq!(passed, call < 3, "round {round}, call {call}");
            tokio::task::yield_now().await;
        }
        clock.advance(Duration::from_secs(60));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_test_sees_only_its_own_counts() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    meet();
    redlimit::scope(store, three_a_minute(&clock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_test_sees_only_its_own_counts_and_so_does_its_layer() {
    let clock = ManualClock::new();
    let store = Store::memory().with_clock(clock.clone());
    meet();
    redlimit::scope(store.clone(), async {
        three_a_minute(&clock).await;
        // A layer built on the global store decides on the scope's.
        let layer = RateLimitLayer::new("scoped.layer", Policy::fixed_window("1/1m").unwrap())
            .key(KeyBy::header("x-user").unwrap());
        let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
        let request = || Request::builder().uri("/").header("x-user", "ann").body(Body::empty()).unwrap();
        assert_eq!(app.call(request()).await.unwrap().status(), 200);
        assert_eq!(app.call(request()).await.unwrap().status(), 429);
        clock.advance(Duration::from_secs(60));
        assert_eq!(app.call(request()).await.unwrap().status(), 200, "the scope's clock");
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_scope_does_not_follow_a_spawned_task_unless_wrapped() {
    let store = Store::memory().with_clock(ManualClock::new());
    let inner = store.clone();
    redlimit::scope(store, async move {
        let wrapped = tokio::spawn(redlimit::scope(inner, async { search("bob").await.is_ok() }));
        assert!(wrapped.await.unwrap());
        for _ in 0..2 {
            assert!(search("bob").await.is_ok());
        }
        assert!(search("bob").await.is_err(), "the wrapped task counted on the same store");
    })
    .await;
}

#[rate_limit(name = "scoped.served", algo = "fixed_window", strategies = "100/1h", key = "<user>")]
async fn served(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

/// One call on the request's task and one on a task it spawns.
async fn handler(axum::extract::Path(user): axum::extract::Path<String>) -> &'static str {
    let inner = user.clone();
    let spawned = tokio::spawn(redlimit::in_current_scope(async move { served(&inner).await.is_ok() }));
    match (served(&user).await.is_ok(), spawned.await.unwrap()) {
        (true, true) => "both",
        _ => "denied",
    }
}

/// `axum::serve` on a loopback port with the app in a `ScopeLayer` of
/// `store`, and requests from two clients (two connections, so two tasks
/// of the server's): `store` counts every call, those of spawned tasks too.
async fn a_served_app_decides_every_call_on_the_test_store(store: &Store) {
    let app = Router::new().route("/{user}", get(handler)).layer(ScopeLayer::new(store.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let clients = [reqwest::Client::new(), reqwest::Client::new()];
    for round in 0..3 {
        for (i, client) in clients.iter().enumerate() {
            let response = client.get(format!("{url}/ann")).send().await.unwrap();
            assert_eq!(response.status(), 200, "round {round}, client {i}");
            assert_eq!(response.text().await.unwrap(), "both");
        }
    }
    server.abort();

    let counted = Limiter::new("scoped.served", Policy::fixed_window("100/1h").unwrap(), store);
    let remaining = counted.peek("ann", 1).await.unwrap().remaining;
    // A peek answers as the next call would be answered.
    assert_eq!(remaining, 100 - 12 - 1, "6 requests of 2 calls each, on the test's store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_app_decides_every_call_on_the_test_store_in_memory() {
    a_served_app_decides_every_call_on_the_test_store(&Store::memory().with_clock(ManualClock::new())).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_app_decides_every_call_on_the_test_store_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    a_served_app_decides_every_call_on_the_test_store(&stores.redis).await;
}
