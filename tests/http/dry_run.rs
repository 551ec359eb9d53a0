//! A dry run is invisible to clients: a layer, a limiter or an annotated
//! function in dry run puts no `RateLimit-Policy`, `RateLimit` or
//! `Retry-After` on the responses it lets through, unless asked to
//! (`dry_run_fields`), and then never `Retry-After`. On the memory store
//! and on Redis.

use axum::routing::get;
use axum::Router;
use redlimit::http::{DecisionHeadersLayer, KeyBy, RateLimitLayer};
use redlimit::{rate_limit, Limiter, Policy, RateLimited};
use redlimit_test_support::http::{header, integer_items, request, send};
use redlimit_test_support::stores::BothStores;

fn app(layer: RateLimitLayer) -> Router {
    Router::new().route("/", get(|| async { "ok" })).layer(layer.key(KeyBy::header("x-api-key").unwrap()))
}

/// The fields a response carries: `RateLimit-Policy`, `RateLimit`, `Retry-After`.
fn fields(response: &axum::response::Response) -> [Option<String>; 3] {
    ["ratelimit-policy", "ratelimit", "retry-after"].map(|name| header(response, name))
}

#[tokio::test]
async fn a_trial_puts_no_fields_on_what_it_lets_through() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        let layered = Limiter::new(format!("dry_layer_{at}"), Policy::fixed_window("1/1m").unwrap(), store);
        let given = Limiter::new(format!("dry_given_{at}"), Policy::fixed_window("1/1m").unwrap(), store);
        let apps = [
            ("a layer in dry run", app(RateLimitLayer::from_limiter(layered).dry_run(true))),
            ("a limiter in dry run", app(RateLimitLayer::from_limiter(given.with_dry_run(true)))),
        ];
        for (what, mut app) in apps {
            for call in 0..3 {
                let response = send(&mut app, request("/", &[("x-api-key", "k")])).await;
                assert_eq!(response.status(), 200, "{at}, {what}, call {call}");
                assert_eq!(
                    fields(&response),
                    [None, None, None],
                    "{at}, {what}, call {call}: would deny from the second"
                );
            }
        }
    }
}

#[tokio::test]
async fn dry_run_fields_state_the_trial_and_never_a_wait() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        let limiter = Limiter::new(format!("dry_fields_{at}"), Policy::fixed_window("1/1m").unwrap(), store);
        let mut app = app(RateLimitLayer::from_limiter(limiter).dry_run(true).dry_run_fields(true));
        for call in 0..3 {
            let response = send(&mut app, request("/", &[("x-api-key", "k")])).await;
            assert_eq!(response.status(), 200, "{at}, call {call}");
            let items = integer_items(response.headers(), "ratelimit", ["r", "t"]);
            assert_eq!(items, [("1/1m".to_string(), 0, 60)], "{at}, call {call}: the trial's count");
            assert_eq!(header(&response, "retry-after"), None, "{at}, call {call}: nothing was refused");
        }
    }
}

#[rate_limit(name = "dry_export", algo = "fixed_window", strategies = "1/1h", key = "<user>", dry_run = true)]
async fn export(user: &str) -> Result<&'static str, RateLimited> {
    Ok("exported")
}

/// Ann's export, under a `DecisionHeadersLayer` as `layer` is set up.
fn exports(layer: DecisionHeadersLayer) -> Router {
    Router::new().route("/", get(|| async { export("ann").await })).layer(layer)
}

#[tokio::test]
async fn a_function_in_dry_run_reports_no_fields() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        redlimit::scope(store.clone(), async {
            let mut app = exports(DecisionHeadersLayer::new());
            for call in 0..3 {
                let response = send(&mut app, request("/", &[])).await;
                assert_eq!(response.status(), 200, "{at}, call {call}");
                assert_eq!(fields(&response), [None, None, None], "{at}, call {call}: would deny from the second");
            }
        })
        .await;
    }
}

#[tokio::test]
async fn dry_run_fields_report_a_function_in_dry_run_and_never_a_wait() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        redlimit::scope(store.clone(), async {
            let mut app = exports(DecisionHeadersLayer::new().dry_run_fields(true));
            for call in 0..3 {
                let response = send(&mut app, request("/", &[])).await;
                let items = integer_items(response.headers(), "ratelimit", ["r", "t"]);
                assert_eq!(items, [("1/1h".to_string(), 0, 3600)], "{at}, call {call}");
                assert_eq!(header(&response, "retry-after"), None, "{at}, call {call}: nothing was refused");
            }
        })
        .await;
    }
}
