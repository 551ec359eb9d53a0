//! The unit tests of `client_ip/mod.rs`: which peer and header give which client.

use super::*;
use axum::http::HeaderValue;

fn client(trusted: &[&str], peer: &str, xff: &[&[u8]]) -> String {
    let proxies = TrustedProxies::new(trusted).unwrap();
    let mut headers = HeaderMap::new();
    for value in xff {
        headers.append("x-forwarded-for", HeaderValue::from_bytes(value).unwrap());
    }
    proxies.client_ip(peer.parse().unwrap(), &headers).to_string()
}

#[test]
fn the_header_is_ignored_unless_the_peer_is_a_trusted_proxy() {
    assert_eq!(client(&[], "203.0.113.5", &[b"1.2.3.4"]), "203.0.113.5");
    assert_eq!(client(&["10.0.0.0/8"], "203.0.113.5", &[b"1.2.3.4"]), "203.0.113.5");
    assert_eq!(client(&["10.0.0.0/8"], "11.0.0.1", &[b"1.2.3.4"]), "11.0.0.1");
}

#[test]
fn a_spoofed_first_hop_is_never_the_client() {
    // The client sent `X-Forwarded-For: 6.6.6.6`; our proxy appended what it saw.
    assert_eq!(client(&["10.0.0.1"], "10.0.0.1", &[b"6.6.6.6, 198.51.100.7"]), "198.51.100.7");
    assert_eq!(client(&["10.0.0.1"], "10.0.0.1", &[b"10.0.0.1, 198.51.100.7"]), "198.51.100.7");
}

#[test]
fn several_proxies_are_walked_from_the_right() {
    let trusted = &["10.0.0.0/8", "172.16.0.0/12"];
    assert_eq!(client(trusted, "10.0.0.3", &[b"6.6.6.6, 198.51.100.7, 172.16.4.4, 10.0.0.2"]), "198.51.100.7");
    // Several header lines are one list, in order.
    assert_eq!(client(trusted, "10.0.0.3", &[b"6.6.6.6, 198.51.100.7", b"172.16.4.4", b"10.0.0.2"]), "198.51.100.7");
    // Every hop trusted: the leftmost.
    assert_eq!(client(trusted, "10.0.0.3", &[b"10.1.1.1, 10.0.0.2"]), "10.1.1.1");
    // No header at all: the peer.
    assert_eq!(client(trusted, "10.0.0.3", &[]), "10.0.0.3");
}

#[test]
fn ipv6_hops_and_networks() {
    let trusted = &["fd00::/8", "::1"];
    assert_eq!(client(trusted, "::1", &[b"2001:db8::1, fd00::5"]), "2001:db8::1");
    assert_eq!(client(trusted, "fd12::1", &[b"[2001:db8::2]:443"]), "2001:db8::2");
    assert_eq!(client(trusted, "fd12::1", &[b"[2001:db8::3]"]), "2001:db8::3");
    // IPv4-mapped addresses are IPv4, for the peer, the hops and the networks.
    assert_eq!(client(&["::ffff:10.0.0.0/104"], "::ffff:10.0.0.9", &[b"::ffff:198.51.100.7"]), "198.51.100.7");
    assert_eq!(client(&["10.0.0.0/8"], "::ffff:10.0.0.9", &[b"198.51.100.7"]), "198.51.100.7");
    assert_eq!(client(&[], "::ffff:203.0.113.1", &[]), "203.0.113.1");
}

#[test]
fn ports_are_dropped() {
    assert_eq!(client(&["10.0.0.0/8"], "10.0.0.1", &[b"198.51.100.7:52110"]), "198.51.100.7");
    assert_eq!(client(&["10.0.0.0/8"], "10.0.0.1", &[b"6.6.6.6, 10.0.0.2:80"]), "6.6.6.6");
}

#[test]
fn garbage_stops_the_walk_at_the_proxy_that_wrote_it() {
    let trusted = &["10.0.0.0/8"];
    for garbage in [
        &b"unknown"[..],
        b"",
        b"   ",
        b"1.2.3",
        b"1.2.3.4:99999",
        b"1.2.3.4:",
        b"[::1",
        b"[::1]x",
        b"::1]:80",
        b"\xff\xfe",
        b"_hidden",
        b"1.2.3.4 5.6.7.8",
    ] {
        let mut xff = b"6.6.6.6, ".to_vec();
        xff.extend_from_slice(garbage);
        xff.extend_from_slice(b", 10.0.0.2");
        assert_eq!(client(trusted, "10.0.0.1", &[&xff]), "10.0.0.2", "{:?}", String::from_utf8_lossy(garbage));
    }
    // Garbage left of the client is never reached.
    assert_eq!(client(trusted, "10.0.0.1", &[b"unknown, 198.51.100.7"]), "198.51.100.7");
    // Straight after the peer: the peer.
    assert_eq!(client(trusted, "10.0.0.1", &[b"nonsense"]), "10.0.0.1");
}

fn client_by(header: ProxyHeader, trusted: &[&str], peer: &str, lines: &[&str]) -> String {
    let proxies = TrustedProxies::new(trusted).unwrap().header(header);
    let mut headers = HeaderMap::new();
    for line in lines {
        headers.append(proxies.header_name(), HeaderValue::from_str(line).unwrap());
    }
    proxies.client_ip(peer.parse().unwrap(), &headers).to_string()
}

#[test]
fn forwarded_is_walked_as_x_forwarded_for_is() {
    let fwd = |trusted: &[&str], peer: &str, lines: &[&str]| client_by(ProxyHeader::Forwarded, trusted, peer, lines);
    let trusted = &["10.0.0.0/8", "fd00::/8"];
    assert_eq!(fwd(trusted, "203.0.113.5", &["for=198.51.100.7"]), "203.0.113.5", "not from a proxy");
    assert_eq!(fwd(trusted, "10.0.0.1", &["for=6.6.6.6, for=198.51.100.7;proto=https"]), "198.51.100.7");
    assert_eq!(fwd(trusted, "10.0.0.1", &["for=6.6.6.6, for=\"[2001:db8::1]:4711\", for=10.0.0.2"]), "2001:db8::1");
    assert_eq!(fwd(trusted, "10.0.0.1", &["for=6.6.6.6", "for=198.51.100.7", "for=\"[fd00::2]\""]), "198.51.100.7");
    assert_eq!(fwd(trusted, "10.0.0.1", &["for=10.1.1.1, for=10.0.0.2"]), "10.1.1.1", "every hop trusted");
    assert_eq!(fwd(trusted, "10.0.0.1", &[]), "10.0.0.1");
    // What is not an address stops the walk at the proxy that wrote it.
    for stop in ["for=unknown", "for=_hidden", "proto=https", ""] {
        assert_eq!(fwd(trusted, "10.0.0.1", &[&format!("for=6.6.6.6, {stop}, for=10.0.0.2")]), "10.0.0.2", "{stop:?}");
    }
    // A syntax error hides where the later elements begin: the walk stops at the peer.
    for malformed in ["for=[::1]", "for=\"x", "for=1.2.3.4;for=5.6.7.8"] {
        let line = format!("for=6.6.6.6, {malformed}, for=10.0.0.2");
        assert_eq!(fwd(trusted, "10.0.0.1", &[&line]), "10.0.0.1", "{malformed:?}");
        // On an earlier line it stops the walk only when reached.
        assert_eq!(fwd(trusted, "10.0.0.1", &[&line, "for=198.51.100.7"]), "198.51.100.7", "{malformed:?}");
    }
    // X-Forwarded-For is not read when Forwarded is asked for, nor the other way round.
    let mut headers = HeaderMap::new();
    headers.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
    headers.insert("forwarded", HeaderValue::from_static("for=198.51.100.7"));
    let proxies = TrustedProxies::new(trusted).unwrap();
    let peer = "10.0.0.1".parse().unwrap();
    assert_eq!(proxies.clone().header(ProxyHeader::Forwarded).client_ip(peer, &headers).to_string(), "198.51.100.7");
    assert_eq!(proxies.client_ip(peer, &headers).to_string(), "6.6.6.6");
}

#[test]
fn x_real_ip_is_one_address_from_a_trusted_peer() {
    let real = |peer: &str, lines: &[&str]| client_by(ProxyHeader::XRealIp, &["10.0.0.0/8"], peer, lines);
    assert_eq!(real("10.0.0.1", &["198.51.100.7"]), "198.51.100.7");
    assert_eq!(real("10.0.0.1", &["[2001:db8::1]:443"]), "2001:db8::1");
    assert_eq!(real("203.0.113.5", &["198.51.100.7"]), "203.0.113.5", "not from a proxy");
    assert_eq!(real("10.0.0.1", &[]), "10.0.0.1");
    assert_eq!(real("10.0.0.1", &["unknown"]), "10.0.0.1");
    assert_eq!(real("10.0.0.1", &["1.2.3.4, 5.6.7.8"]), "10.0.0.1", "a list is not one address");
    assert_eq!(real("10.0.0.1", &["1.2.3.4", "5.6.7.8"]), "10.0.0.1", "nor are two lines");
}

#[test]
fn networks_match_by_prefix() {
    let proxies = TrustedProxies::new(["192.168.1.0/24", "0.0.0.0/0"]).unwrap();
    assert!(proxies.contains("8.8.8.8".parse().unwrap()));
    assert!(!proxies.contains("::1".parse().unwrap()));
    let proxies = TrustedProxies::new(["192.168.1.0/24", "2001:db8::/32"]).unwrap();
    assert!(proxies.contains("192.168.1.255".parse().unwrap()));
    assert!(!proxies.contains("192.168.2.0".parse().unwrap()));
    assert!(proxies.contains("2001:db8:ffff::1".parse().unwrap()));
    assert!(!proxies.contains("2001:db9::1".parse().unwrap()));
    let one = TrustedProxies::new(["10.0.0.1"]).unwrap();
    assert!(one.contains("10.0.0.1".parse().unwrap()) && !one.contains("10.0.0.2".parse().unwrap()));
}

#[test]
fn bad_networks_are_errors_that_name_them() {
    for (bad, why) in [
        ("10.0.0.0/33", "from 0 to 32"),
        ("::/129", "from 0 to 128"),
        ("10.0.0/8", "not an IP address"),
        ("", "not an IP address"),
        ("10.0.0.0/x", "from 0 to 32"),
        ("10.0.0.0/", "from 0 to 32"),
        ("::ffff:10.0.0.0/95", "at least 96"),
        ("10.0.0.0/8/8", "from 0 to 32"),
    ] {
        let message = TrustedProxies::new([bad]).unwrap_err().to_string();
        assert!(message.contains(&format!("`{bad}`")) && message.contains(why), "{message}");
    }
}
