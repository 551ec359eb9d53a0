//! `RateLimitLayer` in front of an axum router, on both stores with one
//! manual clock: keys, header fields on allowed and denied responses,
//! requests without a key or a peer address, and a store that is down.

use axum::body::Body;
use axum::extract::Request;
use axum::routing::get;
use axum::Router;
use redlimit::http::{HeaderStyle, KeyBy, MissingKey, RateLimitLayer, TrustedProxies};
use redlimit::{Limiter, OnError, Policy, Store};
use redlimit_test_support::http::{body, from, header, send};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;

fn app(layer: RateLimitLayer) -> Router {
    Router::new().route("/", get(|| async { "ok" })).layer(layer)
}

#[tokio::test]
async fn client_ips_behind_a_trusted_proxy_are_limited_apart_on_both_stores() {
    let stores = BothStores::start().await;
    for (store_name, store) in stores.each() {
        let limiter = Limiter::new(format!("by_ip_{store_name}"), Policy::sliding_log("2/10s,3/1m").unwrap(), store);
        let proxies = TrustedProxies::new(["10.0.0.0/8"]).unwrap();
        let mut app = app(RateLimitLayer::from_limiter(limiter).key(KeyBy::client_ip(proxies)));
        let via_proxy = |xff: &str| from("10.0.0.1:40000", &[("x-forwarded-for", xff)]);

        let first = send(&mut app, via_proxy("6.6.6.6, 198.51.100.7")).await;
        assert_eq!(first.status(), 200, "{store_name}");
        assert_eq!(header(&first, "ratelimit-policy").unwrap(), r#""2/10s";q=2;w=10, "3/1m";q=3;w=60"#);
        assert_eq!(header(&first, "ratelimit").unwrap(), r#""2/10s";r=1;t=10, "3/1m";r=2;t=60"#, "{store_name}");
        // A different forged first hop is the same client.
        assert_eq!(send(&mut app, via_proxy("7.7.7.7, 198.51.100.7")).await.status(), 200);
        let denied = send(&mut app, via_proxy("8.8.8.8,198.51.100.7")).await;
        assert_eq!(denied.status(), 429, "{store_name}");
        assert_eq!(header(&denied, "retry-after").as_deref(), Some("10"));
        assert_eq!(header(&denied, "ratelimit").unwrap(), r#""2/10s";r=0;t=10, "3/1m";r=1;t=60"#, "{store_name}");
        assert_eq!(
            body(denied).await,
            format!(
                r#"{{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"rate limited by `by_ip_{store_name}` (2/10s exceeded); retry after 10s","retry_after":10,"violated-policies":["2/10s"]}}"#
            )
        );

        // The proxy's own address and a direct client are other keys; a
        // direct client's X-Forwarded-For is ignored.
        assert_eq!(send(&mut app, from("10.0.0.1:40000", &[])).await.status(), 200);
        assert_eq!(
            send(&mut app, from("203.0.113.9:5000", &[("x-forwarded-for", "198.51.100.7")])).await.status(),
            200
        );
        assert_eq!(send(&mut app, from("[2001:db8::1]:443", &[])).await.status(), 200);
    }
}

#[tokio::test]
async fn header_keys_function_keys_and_requests_without_a_key() {
    let stores = BothStores::start().await;
    for (store_name, store) in stores.each() {
        let limiter = Limiter::new(format!("by_header_{store_name}"), Policy::gcra("1/1m", 1).unwrap(), store);
        let mut app = app(RateLimitLayer::from_limiter(limiter.clone())
            .key(KeyBy::header("x-api-key").unwrap())
            .header_style(HeaderStyle::DraftAndLegacy));
        let key = |k: &str| from("127.0.0.1:1", &[("x-api-key", k)]);
        let ok = send(&mut app, key("a")).await;
        assert_eq!(header(&ok, "ratelimit-policy").unwrap(), r#""gcra 1/1m burst 1";q=2;w=120"#);
        assert_eq!(header(&ok, "ratelimit").unwrap(), r#""gcra 1/1m burst 1";r=1;t=60"#);
        assert_eq!(
            (header(&ok, "x-ratelimit-limit").unwrap(), header(&ok, "x-ratelimit-remaining").unwrap()),
            ("2".into(), "1".into())
        );
        assert_eq!(header(&ok, "x-ratelimit-reset").unwrap(), "60");
        assert_eq!(send(&mut app, key("a")).await.status(), 200);
        let denied = send(&mut app, key("a")).await;
        assert_eq!(
            (denied.status().as_u16(), header(&denied, "retry-after").as_deref()),
            (429, Some("60")),
            "{store_name}"
        );
        assert_eq!(send(&mut app, key("b")).await.status(), 200);

        // No header: 400 by default, never counted.
        let missing = send(&mut app, from("127.0.0.1:1", &[])).await;
        assert_eq!(missing.status(), 400);
        assert_eq!(header(&missing, "content-type").unwrap(), "application/problem+json");
        assert!(body(missing).await.contains(&format!(
            "rate limited by `by_header_{store_name}` per header `x-api-key`, and the request has none"
        )));

        // A function key; `MissingKey::Allow` lets key-less requests through uncounted, without headers.
        let layer = RateLimitLayer::from_limiter(limiter.clone())
            .key(KeyBy::function(|r: &Request| r.uri().query().map(|q| format!("tenant:{q}"))))
            .missing_key(MissingKey::Allow);
        let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
        let tenant = |q: &str| Request::builder().uri(format!("/?{q}")).body(Body::empty()).unwrap();
        assert_eq!(send(&mut app, tenant("t1")).await.status(), 200);
        assert_eq!(send(&mut app, tenant("t1")).await.status(), 200);
        assert_eq!(send(&mut app, tenant("t1")).await.status(), 429);
        for _ in 0..3 {
            let anonymous = send(&mut app, Request::builder().uri("/").body(Body::empty()).unwrap()).await;
            assert_eq!(anonymous.status(), 200);
            assert_eq!(header(&anonymous, "ratelimit"), None);
        }
        assert_eq!(limiter.peek("tenant:t1", 0).await.unwrap().remaining, 0);
    }
}

#[tokio::test]
async fn allowed_responses_can_leave_the_headers_out() {
    let store = Store::memory().with_clock(redlimit::ManualClock::new());
    let limiter = Limiter::new("quiet", Policy::fixed_window("1/1m").unwrap(), &store);
    let mut app = app(RateLimitLayer::from_limiter(limiter).headers_on_allowed(false));
    let ok = send(&mut app, from("192.0.2.1:1", &[])).await;
    assert_eq!((ok.status().as_u16(), header(&ok, "ratelimit")), (200, None));
    let denied = send(&mut app, from("192.0.2.1:1", &[])).await;
    assert_eq!(header(&denied, "ratelimit").as_deref(), Some(r#""1/1m";r=0;t=60"#));
}

#[tokio::test]
async fn a_request_without_a_peer_address_is_a_plain_500_and_an_error_for_the_operator() {
    let logs = LogCapture::default();
    let _logs = logs.install();
    let limiter = Limiter::new("no_peer", Policy::fixed_window("1/1m").unwrap(), &Store::memory());
    let mut app = app(RateLimitLayer::from_limiter(limiter));
    for _ in 0..2 {
        let response = send(&mut app, Request::builder().uri("/").body(Body::empty()).unwrap()).await;
        assert_eq!(response.status(), 500);
        assert_eq!(body(response).await, r#"{"type":"about:blank","title":"Internal Server Error","status":500}"#);
    }
    let text = logs.text();
    assert_eq!(text.matches("ERROR").count(), 1, "once per layer: {text}");
    assert!(text.contains("into_make_service_with_connect_info::<SocketAddr>()") && text.contains("no_peer"), "{text}");
}

#[tokio::test]
async fn a_store_that_is_down_is_a_503_under_deny_and_passes_under_allow() {
    let mut server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    server.kill();
    let limiter = Limiter::new("down", Policy::fixed_window("5/1m").unwrap(), &store);

    let mut deny = app(RateLimitLayer::from_limiter(limiter.clone().with_on_error(OnError::Deny)));
    let response = send(&mut deny, from("192.0.2.1:1", &[])).await;
    assert_eq!(response.status(), 503);
    // The store's return cannot be known: no Retry-After, and no RateLimit fields (no state was read).
    assert_eq!((header(&response, "retry-after"), header(&response, "ratelimit")), (None, None));
    assert_eq!(
        body(response).await,
        r#"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the store of rate limiter `down` is unavailable, so the request could not be decided"}"#
    );

    let mut allow = app(RateLimitLayer::from_limiter(limiter.with_on_error(OnError::Allow)));
    let response = send(&mut allow, from("192.0.2.1:1", &[])).await;
    assert_eq!((response.status().as_u16(), header(&response, "ratelimit")), (200, None));
}

#[tokio::test]
async fn a_cost_the_policy_can_never_admit_is_a_429_without_retry_after() {
    let limiter = Limiter::new(
        "too_big",
        Policy::fixed_window("2/1m").unwrap(),
        &Store::memory().with_clock(redlimit::ManualClock::new()),
    );
    let mut app = app(RateLimitLayer::from_limiter(limiter).cost(3));
    let response = send(&mut app, from("192.0.2.1:1", &[])).await;
    assert_eq!((response.status().as_u16(), header(&response, "retry-after")), (429, None));
    // Counted in whole requests of 3 permits, a limit of 2 admits none.
    assert_eq!(header(&response, "ratelimit-policy").as_deref(), Some(r#""2/1m";q=0;w=60"#));
    let body = body(response).await;
    assert!(body.contains("this cost can never pass") && !body.contains("retry_after"), "{body}");
}
