//! `KeyBy::client_ip` behind proxies that write RFC 7239 `Forwarded` or
//! `X-Real-IP`, through an axum router on the memory store with a manual
//! clock: the header counts only from a trusted peer, is walked from the
//! right, and what is not an address (or does not parse) never lets a
//! client choose its key.

use axum::http::{HeaderMap, HeaderValue};
use axum::routing::get;
use axum::Router;
use proptest::prelude::*;
use redlimit::http::{KeyBy, ProxyHeader, RateLimitLayer, TrustedProxies};
use redlimit::{Limiter, ManualClock, Policy, Store};
use redlimit_test_support::http::{from, send};

const PROXY: &str = "10.0.0.1:40000";

/// A router limiting each client to one request a minute, and its limiter.
fn limited(name: &str, proxies: TrustedProxies) -> (Router, Limiter) {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new(name, Policy::fixed_window("1/1m").unwrap(), &store);
    let layer = RateLimitLayer::from_limiter(limiter.clone()).key(KeyBy::client_ip(proxies));
    (Router::new().route("/", get(|| async { "ok" })).layer(layer), limiter)
}

/// Whether `key` has used its one request.
async fn counted(limiter: &Limiter, key: &str) -> bool {
    limiter.peek(key, 0).await.unwrap().remaining == 0
}

fn forwarding_proxies() -> TrustedProxies {
    TrustedProxies::new(["10.0.0.0/8", "fd00::/8"]).unwrap().header(ProxyHeader::Forwarded)
}

#[tokio::test]
async fn forwarded_from_a_trusted_proxy_names_the_rightmost_untrusted_hop() {
    let (mut app, limiter) = limited("fwd", forwarding_proxies());
    let via_proxy = |forwarded: &str| from(PROXY, &[("forwarded", forwarded)]);

    assert_eq!(send(&mut app, via_proxy("for=6.6.6.6, for=198.51.100.7;proto=https;by=10.0.0.1")).await.status(), 200);
    assert!(counted(&limiter, "198.51.100.7").await);
    // Another forged first hop is the same client.
    let denied = send(&mut app, via_proxy("for=7.7.7.7, For=198.51.100.7")).await;
    assert_eq!(denied.status(), 429);

    // A quoted IPv6 node with a port, behind a second trusted proxy; counted by its /64.
    let v6 = via_proxy(r#"for=6.6.6.6, for="[2001:db8:1:2::17]:4711", for="[fd00::2]""#);
    assert_eq!(send(&mut app, v6).await.status(), 200);
    assert!(counted(&limiter, "2001:db8:1:2::/64").await);

    // Several header lines are one list, in order.
    let lines =
        from(PROXY, &[("forwarded", "for=6.6.6.6"), ("forwarded", "for=192.0.2.60"), ("forwarded", "for=10.0.0.2")]);
    assert_eq!(send(&mut app, lines).await.status(), 200);
    assert!(counted(&limiter, "192.0.2.60").await);

    // X-Forwarded-For is not read when the proxies write Forwarded: a client could have sent it.
    let both = from(PROXY, &[("x-forwarded-for", "203.0.113.50"), ("forwarded", "for=203.0.113.51")]);
    assert_eq!(send(&mut app, both).await.status(), 200);
    assert!(counted(&limiter, "203.0.113.51").await && !counted(&limiter, "203.0.113.50").await);
}

#[tokio::test]
async fn forwarded_is_ignored_unless_the_peer_is_a_trusted_proxy() {
    // No trusted proxy at all: the peer, whatever the header says.
    let (mut app, limiter) = limited("fwd_none", TrustedProxies::none().header(ProxyHeader::Forwarded));
    for spoof in ["for=1.1.1.1", "for=2.2.2.2", "for=3.3.3.3"] {
        let status = send(&mut app, from("203.0.113.9:5000", &[("forwarded", spoof)])).await.status();
        assert_eq!(status, if spoof == "for=1.1.1.1" { 200 } else { 429 }, "{spoof}");
    }
    assert!(counted(&limiter, "203.0.113.9").await && !counted(&limiter, "1.1.1.1").await);

    // Trusted proxies, but this peer is not one of them.
    let (mut app, limiter) = limited("fwd_direct", forwarding_proxies());
    assert_eq!(send(&mut app, from("203.0.113.9:5000", &[("forwarded", "for=1.1.1.1")])).await.status(), 200);
    assert_eq!(send(&mut app, from("203.0.113.9:5000", &[("forwarded", "for=2.2.2.2")])).await.status(), 429);
    assert!(counted(&limiter, "203.0.113.9").await);
}

#[tokio::test]
async fn what_is_not_an_address_stops_the_walk_and_malformed_values_fall_back_to_the_proxy() {
    // Not addresses: the client is the trusted proxy that wrote them (10.0.0.2).
    for stop in [r#"for="_gazonk""#, "for=unknown", "proto=https", ""] {
        let (mut app, limiter) = limited("fwd_stop", forwarding_proxies());
        let line = format!("for=6.6.6.6, {stop}, for=10.0.0.2");
        assert_eq!(send(&mut app, from(PROXY, &[("forwarded", &line)])).await.status(), 200);
        assert!(counted(&limiter, "10.0.0.2").await && !counted(&limiter, "6.6.6.6").await, "{stop:?}");
    }
    // Malformed: the rest of the line cannot be read, so the peer (10.0.0.1) is the client.
    for malformed in [
        "for=",
        "for=[2001:db8::1]",
        "for=192.0.2.1:80",
        r#"for="[2001:db8::1"#,
        r#"for="192.0.2.1:99999""#,
        r#"for="2001:db8::1""#,
        "for=192.0.2.1;for=192.0.2.2",
        "for=192.0.2.1 192.0.2.2",
        r#"for=6.6.6.6, for="x, for=10.0.0.2"#,
    ] {
        let (mut app, limiter) = limited("fwd_malformed", forwarding_proxies());
        assert_eq!(send(&mut app, from(PROXY, &[("forwarded", malformed)])).await.status(), 200);
        assert!(counted(&limiter, "10.0.0.1").await, "{malformed:?}");
        assert_eq!(send(&mut app, from(PROXY, &[("forwarded", malformed)])).await.status(), 429, "{malformed:?}");
    }
    // Bytes that are not text are not an address either.
    let (mut app, limiter) = limited("fwd_bytes", forwarding_proxies());
    let mut request = from(PROXY, &[]);
    request.headers_mut().insert("forwarded", HeaderValue::from_bytes(b"for=\xff1.2.3.4").unwrap());
    assert_eq!(send(&mut app, request).await.status(), 200);
    assert!(counted(&limiter, "10.0.0.1").await);
}

#[tokio::test]
async fn x_real_ip_is_read_only_when_asked_for_and_only_from_a_trusted_peer() {
    let real_ip = |ip: &str| from(PROXY, &[("x-real-ip", ip)]);

    // Not asked for: X-Real-IP is ignored (the proxies write X-Forwarded-For).
    let (mut app, limiter) = limited("real_off", TrustedProxies::new(["10.0.0.0/8"]).unwrap());
    assert_eq!(send(&mut app, real_ip("198.51.100.7")).await.status(), 200);
    assert!(counted(&limiter, "10.0.0.1").await && !counted(&limiter, "198.51.100.7").await);

    let proxies = TrustedProxies::new(["10.0.0.0/8"]).unwrap().header(ProxyHeader::XRealIp);
    let (mut app, limiter) = limited("real_on", proxies);
    assert_eq!(send(&mut app, real_ip("198.51.100.7")).await.status(), 200);
    assert_eq!(send(&mut app, real_ip("198.51.100.7")).await.status(), 429);
    assert_eq!(send(&mut app, real_ip("198.51.100.8")).await.status(), 200, "another client");
    assert!(counted(&limiter, "198.51.100.7").await && !counted(&limiter, "10.0.0.1").await);
    // From a peer that is not a proxy, or not one address: the peer.
    assert_eq!(send(&mut app, from("203.0.113.9:1", &[("x-real-ip", "192.0.2.99")])).await.status(), 200);
    assert!(counted(&limiter, "203.0.113.9").await && !counted(&limiter, "192.0.2.99").await);
    assert_eq!(send(&mut app, real_ip("192.0.2.1, 192.0.2.2")).await.status(), 200);
    assert!(counted(&limiter, "10.0.0.1").await);
}

/// Bytes a client could put in a `Forwarded` line: its grammar's characters
/// weighted up, and any other byte a header value may hold.
fn client_line() -> impl Strategy<Value = Vec<u8>> {
    let grammar = prop::sample::select(b"for=;,\"[]:_.\\ 0123456789abcdef".to_vec());
    let any_byte = any::<u8>().prop_filter("a header value byte", |&b| b == b'\t' || (b >= 0x20 && b != 0x7f));
    prop::collection::vec(prop_oneof![3 => grammar, 1 => any_byte], 0..48)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever a client writes, the element a trusted proxy appends decides:
    /// on its own line it names the client; on the client's line it names the
    /// client or, when the client's text leaves the line unreadable, the
    /// proxy. Never an address of the client's choosing, never a panic.
    #[test]
    fn a_client_cannot_choose_its_address_through_forwarded(line in client_line()) {
        let proxies = forwarding_proxies();
        let peer = "10.0.0.1".parse().unwrap();
        let Ok(value) = HeaderValue::from_bytes(&line) else { return Ok(()) };

        let mut headers = HeaderMap::new();
        headers.append("forwarded", value);
        headers.append("forwarded", HeaderValue::from_static("for=198.51.100.7"));
        prop_assert_eq!(proxies.client_ip(peer, &headers).to_string(), "198.51.100.7");

        let mut same_line = line.clone();
        same_line.extend_from_slice(b", for=198.51.100.7");
        let mut headers = HeaderMap::new();
        headers.insert("forwarded", HeaderValue::from_bytes(&same_line).unwrap());
        let client = proxies.client_ip(peer, &headers).to_string();
        prop_assert!(client == "198.51.100.7" || client == "10.0.0.1", "{:?} -> {}", String::from_utf8_lossy(&same_line), client);
    }
}
