//! `redlimit::scope`: each test gives the annotated functions and layers it
//! calls a store of its own, with its own `ManualClock`, in one test binary
//! (the global store can be set only once per process). The two tests below
//! drive the same `#[rate_limit]` function at the same time (each waits a
//! little for the other to start) and each sees only its own counts.

use axum::{body::Body, extract::Request, routing::get, Router};
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{rate_limit, ManualClock, Policy, RateLimited, Store};
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
