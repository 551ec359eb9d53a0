//! After a refund, the fields state the key after it: the attribute's
//! `refund_on = "err"` (reported by `DecisionHeadersLayer`) as the layer's
//! own `refund_on` does, so one response never shows a permit that came
//! back as used. On the memory store and on Redis.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use redlimit::http::{DecisionHeadersLayer, KeyBy, RateLimitLayer};
use redlimit::{rate_limit, Limiter, Policy, RateLimited};
use redlimit_test_support::http::{integer_items, request, send};
use redlimit_test_support::stores::BothStores;

enum FetchError {
    Limited(RateLimited),
    Upstream,
}

impl From<RateLimited> for FetchError {
    fn from(denied: RateLimited) -> FetchError {
        FetchError::Limited(denied)
    }
}

impl IntoResponse for FetchError {
    fn into_response(self) -> Response {
        match self {
            FetchError::Limited(denied) => denied.into_response(),
            FetchError::Upstream => StatusCode::BAD_GATEWAY.into_response(),
        }
    }
}

#[rate_limit(
    name = "refund_fields.fetch",
    algo = "fixed_window",
    strategies = "5/1m",
    key = "<user>",
    refund_on = "err"
)]
async fn fetch(user: &str, upstream_up: bool) -> Result<&'static str, FetchError> {
    match upstream_up {
        true => Ok("data"),
        false => Err(FetchError::Upstream),
    }
}

/// `(status, [(item, r)])` of the response to `path`.
async fn ask(app: &mut Router, path: &str) -> (u16, Vec<(String, i64)>) {
    let response = send(app, request(path, &[("x-user", "ann")])).await;
    let items = integer_items(response.headers(), "ratelimit", ["r", "t"]);
    (response.status().as_u16(), items.into_iter().map(|(name, r, _)| (name, r)).collect())
}

fn items(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(name, r)| (name.to_string(), *r)).collect()
}

#[tokio::test]
async fn both_refunds_state_the_key_after_them() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        let limiter = Limiter::new(format!("refund_fields_layer_{at}"), Policy::fixed_window("2/1m").unwrap(), store);
        let layer = RateLimitLayer::from_limiter(limiter)
            .key(KeyBy::header("x-user").unwrap())
            .refund_on(|status: StatusCode| status.is_server_error());
        let mut app = Router::new()
            .route("/", get(|| async { fetch("ann", true).await }))
            .route("/down", get(|| async { fetch("ann", false).await }))
            .layer(layer)
            .layer(DecisionHeadersLayer::new());
        redlimit::scope(store.clone(), async {
            for call in 0..3 {
                let failed = ask(&mut app, "/down").await;
                assert_eq!(failed, (502, items(&[("2/1m", 2), ("5/1m", 5)])), "{at}, call {call}: both given back");
            }
            assert_eq!(ask(&mut app, "/").await, (200, items(&[("2/1m", 1), ("5/1m", 4)])), "{at}");
        })
        .await;
    }
}
