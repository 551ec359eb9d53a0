//! A real HTTP client that obeys the header fields, against a real server:
//! an axum router like `examples/axum_server.rs` (a `RateLimitLayer` route
//! per algorithm, sub-second windows and buckets included) on a loopback
//! TCP listener, driven by `reqwest`.
//!
//! The server's store runs on a `ManualClock` the test owns, and the client
//! "waits" by advancing it by what the headers say, so nothing depends on
//! how fast the machine is; each run is a fixed count of requests.
//!
//! Three clients, each on every route, on the memory store and on Redis:
//! - one pacing by `RateLimit`: sends while `r` is above 0, then waits the
//!   longest `t` of the items at 0. It never sees a 429.
//! - one pacing by `RateLimit-Policy`: sends as soon as no item would have
//!   more than `q` requests in any `w` seconds. It never sees a 429.
//! - one that ignores both until denied, then waits `Retry-After`: the
//!   request after the wait is never denied.

use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{Limiter, ManualClock, Policy, Store};
use redlimit_test_support::http::list_items;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use std::time::Duration;

/// Requests each client sends to each route.
const REQUESTS: usize = 40;

/// `(route, policy)`: every algorithm, with a window, a bucket and GCRA
/// that are shorter than a second.
fn routes() -> Vec<(&'static str, Policy)> {
    vec![
        ("/fixed", Policy::fixed_window("3/10s,5/1m").unwrap()),
        ("/fixed-sub", Policy::fixed_window("10/100ms").unwrap()),
        ("/sliding", Policy::sliding_window("4/2s", "500ms").unwrap()),
        ("/log", Policy::sliding_log("3/1500ms").unwrap()),
        ("/tokens", Policy::token_bucket(3, "1/3s").unwrap()),
        ("/tokens-sub", Policy::token_bucket(10, "100/1s").unwrap()),
        ("/leaky", Policy::leaky_bucket(2, "1/2s").unwrap()),
        ("/gcra", Policy::gcra("2/1s", 1).unwrap()),
        ("/gcra-sub", Policy::gcra("10/1s", 0).unwrap()),
    ]
}

/// The router, each route behind its own limiter on `store`, keyed by `x-api-key`.
fn app(store: &Store, prefix: &str) -> Router {
    let mut router = Router::new();
    for (route, policy) in routes() {
        let limiter = Limiter::new(format!("{prefix}{route}"), policy, store);
        let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key").unwrap());
        router = router.route(route, get(|| async { "ok" }).layer(layer));
    }
    router
}

/// Serves `app` on a free loopback port; returns its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// A list field's items: name and integer parameters.
fn items(headers: &HeaderMap, field: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let integers = |params: Vec<(String, String)>| params.into_iter().filter_map(|(k, v)| Some((k, v.parse().ok()?)));
    list_items(headers, field).into_iter().map(|(name, params)| (name, integers(params).collect())).collect()
}

fn param(params: &[(String, i64)], key: &str) -> i64 {
    params.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no {key}")).1
}

fn retry_after(headers: &HeaderMap) -> Option<u64> {
    Some(headers.get("retry-after")?.to_str().unwrap().parse().unwrap())
}

/// How a client decides when to send its next request.
#[derive(Debug, Clone, Copy)]
enum Obeys {
    RateLimit,
    Policy,
    RetryAfter,
}

/// One client's run on one route: the statuses it saw, in order.
async fn run(client: &reqwest::Client, url: &str, key: &str, clock: &ManualClock, obeys: Obeys) -> Vec<StatusCode> {
    let mut statuses = Vec::with_capacity(REQUESTS);
    // Policy pacing: when each request was sent, in seconds of waiting.
    let (mut sent, mut elapsed) = (Vec::new(), 0u64);
    for _ in 0..REQUESTS {
        let response = client.get(url).header("x-api-key", key).send().await.unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        statuses.push(status);
        let wait = match obeys {
            Obeys::RetryAfter => retry_after(&headers).unwrap_or(0),
            Obeys::RateLimit => {
                let exhausted = items(&headers, "ratelimit").into_iter().filter(|(_, p)| param(p, "r") == 0);
                exhausted.map(|(_, p)| param(&p, "t")).max().unwrap_or(0) as u64
            }
            Obeys::Policy => {
                // No more than q in any w seconds, for every item: wait
                // until the q-th latest request is w seconds old.
                sent.push(elapsed);
                let policy = items(&headers, "ratelimit-policy");
                assert!(!policy.is_empty(), "RateLimit-Policy on every response");
                let ready_at = policy
                    .iter()
                    .map(|(_, p)| (param(p, "q") as usize, param(p, "w") as u64))
                    .filter(|&(q, _)| sent.len() >= q)
                    .map(|(q, w)| sent[sent.len() - q] + w)
                    .max()
                    .unwrap_or(elapsed);
                ready_at.saturating_sub(elapsed)
            }
        };
        clock.advance(Duration::from_secs(wait));
        elapsed += wait;
    }
    statuses
}

async fn every_client_on_every_route(store: &Store, clock: &ManualClock, prefix: &str) {
    let url = serve(app(store, prefix)).await;
    let client = reqwest::Client::new();
    for (route, policy) in routes() {
        for obeys in [Obeys::RateLimit, Obeys::Policy, Obeys::RetryAfter] {
            let key = format!("{obeys:?}");
            let statuses = run(&client, &format!("{url}{route}"), &key, clock, obeys).await;
            let denied = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
            let at = format!("{prefix} {route} ({policy}) obeying {obeys:?}");
            assert!(statuses.iter().all(|s| *s == StatusCode::OK || *s == StatusCode::TOO_MANY_REQUESTS), "{at}");
            match obeys {
                Obeys::RateLimit | Obeys::Policy => assert_eq!(denied, 0, "{at}: {statuses:?}"),
                Obeys::RetryAfter => {
                    assert!(denied > 0, "{at}: {REQUESTS} requests at once must reach the limit");
                    let twice = statuses.windows(2).filter(|w| w.iter().all(|s| *s == StatusCode::TOO_MANY_REQUESTS));
                    assert_eq!(twice.count(), 0, "{at}: denied after waiting Retry-After: {statuses:?}");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_obeying_the_fields_are_never_denied_on_the_memory_store() {
    let clock = ManualClock::new();
    every_client_on_every_route(&Store::memory().with_clock(clock.clone()), &clock, "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_obeying_the_fields_are_never_denied_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    every_client_on_every_route(&stores.redis, &stores.clock, "redis").await;
}
