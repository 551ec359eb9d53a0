//! `DecisionHeadersLayer`: responses of `#[rate_limit]` handlers carry the
//! `RateLimit-Policy` and `RateLimit` fields of what the attributes decided,
//! through a real axum `Router` (and a real listener), on the memory store
//! with a manual clock.
//!
//! Every test shares this binary's global store and its clock, so they run
//! one at a time (`SERIAL`) and each uses its own limiter names.

use axum::body::Body;
use axum::extract::{Path, Request};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use redlimit::http::{DecisionHeadersLayer, KeyBy, RateLimitLayer, QUOTA_EXCEEDED};
use redlimit::{rate_limit, Limiter, ManualClock, Policy, RateLimited, Store};
use redlimit_test_support::http::body;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard};
use tower_service::Service;

/// The global store's clock; the guard keeps other tests from moving it.
async fn clock() -> (ManualClock, MutexGuard<'static, ()>) {
    static SERIAL: Mutex<()> = Mutex::const_new(());
    static CLOCK: OnceLock<ManualClock> = OnceLock::new();
    let guard = SERIAL.lock().await;
    let clock = CLOCK.get_or_init(|| {
        let clock = ManualClock::new();
        redlimit::init(Store::memory().with_clock(clock.clone())).unwrap();
        clock
    });
    (clock.clone(), guard)
}

#[rate_limit(name = "single", algo = "fixed_window", strategies = "2/1m", key = "<user>")]
async fn single(user: String) -> Result<String, RateLimited> {
    Ok(format!("profile of {user}"))
}

#[rate_limit(name = "stacked.user", algo = "fixed_window", strategies = "3/1m", key = "<user>")]
#[rate_limit(name = "stacked.all", algo = "fixed_window", strategies = "5/1h")]
async fn stacked(user: String) -> Result<String, RateLimited> {
    Ok(format!("feed of {user}"))
}

#[rate_limit(name = "served.user", algo = "fixed_window", strategies = "3/1m", key = "<user>")]
#[rate_limit(name = "served.all", algo = "fixed_window", strategies = "5/1h")]
async fn served(user: String) -> Result<String, RateLimited> {
    Ok(format!("page of {user}"))
}

#[rate_limit(name = "twice", algo = "fixed_window", strategies = "10/1m")]
async fn twice() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(name = "inner", algo = "fixed_window", strategies = "4/1m")]
async fn inner() -> Result<&'static str, RateLimited> {
    Ok("inner")
}

fn router() -> Router {
    Router::new()
        .route("/single/{user}", get(|Path(user): Path<String>| single(user)))
        .route("/stacked/{user}", get(|Path(user): Path<String>| stacked(user)))
        .route("/served/{user}", get(|Path(user): Path<String>| served(user)))
        .route(
            "/twice",
            get(|| async {
                twice().await?;
                twice().await?;
                Ok::<_, RateLimited>("twice")
            }),
        )
}

fn app() -> Router {
    router().layer(DecisionHeadersLayer::new())
}

async fn get_(app: &mut Router, uri: &str) -> Response {
    app.call(Request::builder().uri(uri).body(Body::empty()).unwrap()).await.unwrap()
}

/// Every value of `name`, one per field line.
fn fields(response: &Response, name: &str) -> Vec<String> {
    response.headers().get_all(name).iter().map(|v| v.to_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn an_allowed_handler_call_reports_its_decision_and_a_denial_keeps_its_own_fields() {
    let (clock, _serial) = clock().await;
    let mut app = app();

    let first = get_(&mut app, "/single/ann").await;
    assert_eq!(first.status(), 200);
    assert_eq!(fields(&first, "ratelimit-policy"), [r#""2/1m";q=2;w=60"#]);
    assert_eq!(fields(&first, "ratelimit"), [r#""2/1m";r=1;t=60"#]);
    assert!(first.headers().get("retry-after").is_none());
    assert_eq!(body(first).await, "profile of ann");

    clock.advance(Duration::from_secs(15));
    let second = get_(&mut app, "/single/ann").await;
    assert_eq!(second.status(), 200);
    assert_eq!(fields(&second, "ratelimit"), [r#""2/1m";r=0;t=45"#]);

    // Another key is its own limit, and its own fields.
    let other = get_(&mut app, "/single/bob").await;
    assert_eq!(fields(&other, "ratelimit"), [r#""2/1m";r=1;t=60"#]);

    // The denial's 429 carries its fields once, as IntoResponse made them.
    clock.advance(Duration::from_millis(250));
    let denied = get_(&mut app, "/single/ann").await;
    assert_eq!(denied.status(), 429);
    assert_eq!(fields(&denied, "retry-after"), ["45"]);
    assert_eq!(fields(&denied, "ratelimit-policy"), [r#""2/1m";q=2;w=60"#]);
    assert_eq!(fields(&denied, "ratelimit"), [r#""2/1m";r=0;t=45"#]);
    let body = body(denied).await;
    assert!(body.contains(&format!(r#""type":"{QUOTA_EXCEEDED}""#)), "{body}");
    assert!(
        body.contains(r#""detail":"rate limited by `single` (2/1m exceeded); retry after 45s","retry_after":45"#),
        "{body}"
    );
    assert!(!body.contains("ann"), "the key never reaches the body: {body}");
}

#[tokio::test]
async fn stacked_attributes_are_reported_as_one_item_each_in_the_order_written() {
    let (clock, _serial) = clock().await;
    let mut app = app();

    let first = get_(&mut app, "/stacked/ann").await;
    assert_eq!(first.status(), 200);
    assert_eq!(fields(&first, "ratelimit-policy"), [r#""3/1m";q=3;w=60, "5/1h";q=5;w=3600"#]);
    assert_eq!(fields(&first, "ratelimit"), [r#""3/1m";r=2;t=60, "5/1h";r=4;t=3600"#]);

    clock.advance(Duration::from_secs(10));
    for (i, user) in ["bob", "cid", "dee", "eve"].into_iter().enumerate() {
        let response = get_(&mut app, &format!("/stacked/{user}")).await;
        assert_eq!(response.status(), 200, "{user}");
        let expected = format!(r#""3/1m";r=2;t=60, "5/1h";r={};t=3590"#, 3 - i);
        assert_eq!(fields(&response, "ratelimit"), [expected], "{user}");
    }

    // The per-user limit allows a sixth user, the shared one denies: the 429
    // has the denying policy's fields only, not the allowed one's as well.
    let denied = get_(&mut app, "/stacked/fay").await;
    assert_eq!(denied.status(), 429);
    assert_eq!(fields(&denied, "retry-after"), ["3590"]);
    assert_eq!(fields(&denied, "ratelimit-policy"), [r#""5/1h";q=5;w=3600"#]);
    assert_eq!(fields(&denied, "ratelimit"), [r#""5/1h";r=0;t=3590"#]);
    let body = body(denied).await;
    assert!(body.ends_with(r#""retry_after":3590,"violated-policies":["5/1h"]}"#), "{body}");

    // Denied by the first attribute: the second is never asked.
    clock.advance(Duration::from_secs(3590));
    for _ in 0..2 {
        assert_eq!(get_(&mut app, "/stacked/gus").await.status(), 200);
    }
    let third = get_(&mut app, "/stacked/gus").await;
    assert_eq!(fields(&third, "ratelimit"), [r#""3/1m";r=0;t=60, "5/1h";r=2;t=3600"#]);
    let denied = get_(&mut app, "/stacked/gus").await;
    assert_eq!(denied.status(), 429);
    assert_eq!(fields(&denied, "retry-after"), ["60"]);
    assert_eq!(fields(&denied, "ratelimit-policy"), [r#""3/1m";q=3;w=60"#]);
    assert_eq!(fields(&denied, "ratelimit"), [r#""3/1m";r=0;t=60"#]);
}

#[tokio::test]
async fn a_function_called_twice_in_one_request_reports_its_latest_decision() {
    let (_clock, _serial) = clock().await;
    let response = get_(&mut app(), "/twice").await;
    assert_eq!(response.status(), 200);
    assert_eq!(fields(&response, "ratelimit-policy"), [r#""10/1m";q=10;w=60"#]);
    assert_eq!(fields(&response, "ratelimit"), [r#""10/1m";r=8;t=60"#]);
}

#[tokio::test]
async fn without_the_layer_a_handler_response_has_no_fields() {
    let (_clock, _serial) = clock().await;
    let response = get_(&mut router(), "/single/without-layer").await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("ratelimit").is_none());
    assert!(response.headers().get("ratelimit-policy").is_none());
}

#[tokio::test]
async fn a_rate_limit_layer_inside_and_the_handler_both_state_their_fields() {
    let (_clock, _serial) = clock().await;
    let limiter =
        Limiter::new("route", Policy::fixed_window("7/1m").unwrap(), &Store::memory().with_clock(ManualClock::new()));
    let route = RateLimitLayer::from_limiter(limiter).key(KeyBy::function(|_| Some("k".into())));
    let mut app = Router::new().route("/", get(inner)).layer(route).layer(DecisionHeadersLayer::new());
    // Allowed by both: the layer's items, then the handler's.
    for left in [3, 2, 1, 0] {
        let response = get_(&mut app, "/").await;
        assert_eq!(response.status(), 200);
        assert_eq!(fields(&response, "ratelimit-policy"), [r#""7/1m";q=7;w=60, "4/1m";q=4;w=60"#]);
        assert_eq!(fields(&response, "ratelimit"), [format!(r#""7/1m";r={};t=60, "4/1m";r={left};t=60"#, left + 3)]);
    }
    // Denied by the handler: its 429 keeps its own fields, and the layer,
    // which allowed the request, gives its permit back (the handler's work
    // never ran) and adds its items after them, counted after the refund.
    let denied = get_(&mut app, "/").await;
    assert_eq!(denied.status(), 429);
    assert_eq!(fields(&denied, "retry-after"), ["60"]);
    assert_eq!(fields(&denied, "ratelimit-policy"), [r#""4/1m";q=4;w=60, "7/1m";q=7;w=60"#]);
    assert_eq!(fields(&denied, "ratelimit"), [r#""4/1m";r=0;t=60, "7/1m";r=3;t=60"#]);
}

#[tokio::test]
async fn a_real_server_sends_the_fields_of_stacked_attributes() {
    let (_clock, _serial) = clock().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app()).await });

    let client = reqwest::Client::new();
    let response = client.get(format!("http://{address}/served/ann")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("ratelimit-policy"), r#""3/1m";q=3;w=60, "5/1h";q=5;w=3600"#);
    assert_eq!(header("ratelimit"), r#""3/1m";r=2;t=60, "5/1h";r=4;t=3600"#);
    server.abort();
}
