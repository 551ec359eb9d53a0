//! Limits stacked over HTTP: when a limit inside a `RateLimitLayer` denies
//! the request (an annotated handler's `RateLimited` 429, or another
//! layer's rejection), the route it paid for never ran, so the outer layer
//! gives its permits back before the response leaves, and its fields say
//! so. On the memory store and on Redis.

use axum::response::Response;
use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{rate_limit, Limiter, Policy, RateLimited, Store};
use redlimit_test_support::http::{integer_items, request, send};
use redlimit_test_support::stores::BothStores;

/// `r` of the `RateLimit` item named `item`, or -1 when there is none.
fn remaining(response: &Response, item: &str) -> i64 {
    let items = integer_items(response.headers(), "ratelimit", ["r", "t"]);
    items.iter().find(|(name, _, _)| name == item).map_or(-1, |(_, r, _)| *r)
}

async fn ask(app: &mut Router, path: &str) -> Response {
    send(app, request(path, &[("x-user", "ann")])).await
}

fn plan(store: &Store, at: &str, what: &str) -> Limiter {
    Limiter::new(format!("http_stacked_{what}_{at}"), Policy::fixed_window("3/1m").unwrap(), store)
}

fn layer(limiter: &Limiter) -> RateLimitLayer {
    RateLimitLayer::from_limiter(limiter.clone()).key(KeyBy::header("x-user").unwrap())
}

#[rate_limit(name = "http_stacked.burst", algo = "gcra", rate = "1/1m", key = "<user>")]
async fn search(user: &str) -> Result<&'static str, RateLimited> {
    Ok("results")
}

/// What is left of `plan`: a route under its layer alone takes the rest.
async fn left(plan: &Limiter) -> usize {
    let mut alone = Router::new().route("/", get(|| async { "ok" })).layer(layer(plan));
    let mut passed = 0;
    while ask(&mut alone, "/").await.status() == 200 {
        passed += 1;
        assert!(passed <= 3, "never more than the plan");
    }
    passed
}

#[tokio::test]
async fn an_annotated_handler_s_denial_gives_the_layer_s_permit_back() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        let plan = plan(store, at, "handler");
        redlimit::scope(store.clone(), async {
            let handler = || async { search("ann").await };
            let mut app = Router::new().route("/search", get(handler)).layer(layer(&plan));
            let first = ask(&mut app, "/search").await;
            assert_eq!((first.status().as_u16(), remaining(&first, "3/1m")), (200, 2), "{at}");
            for call in 0..4 {
                let denied = ask(&mut app, "/search").await;
                assert_eq!(denied.status(), 429, "{at}, call {call}");
                assert_eq!(remaining(&denied, "3/1m"), 2, "{at}, call {call}: the plan's permit came back");
            }
        })
        .await;
        assert_eq!(left(&plan).await, 2, "{at}");
    }
}

#[tokio::test]
async fn an_inner_layer_s_rejection_gives_the_outer_layer_s_permit_back() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        let plan = plan(store, at, "layers");
        let burst = Limiter::new(format!("http_stacked_burst_{at}"), Policy::gcra("1/1m", 0).unwrap(), store);
        // The layer added last runs first: the plan is outside the burst.
        let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer(&burst)).layer(layer(&plan));
        assert_eq!(ask(&mut app, "/").await.status(), 200, "{at}");
        for call in 0..4 {
            let denied = ask(&mut app, "/").await;
            assert_eq!(denied.status(), 429, "{at}, call {call}");
            assert_eq!(remaining(&denied, "3/1m"), 2, "{at}, call {call}: the plan's permit came back");
        }
        assert_eq!(left(&plan).await, 2, "{at}");
    }
}
