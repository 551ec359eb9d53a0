//! The client's IP address behind trusted proxies: the rightmost hop of
//! `X-Forwarded-For` (or `Forwarded`, or `X-Real-IP`) that none of your
//! proxies wrote.

use super::forwarded::{self, is_port};
use crate::Error;
use axum::http::HeaderMap;
use ipnet::{IpNet, Ipv4Net};
use std::net::IpAddr;

/// The networks of your own reverse proxies, and the header they write the
/// client's address in ([`ProxyHeader`], default `X-Forwarded-For`).
///
/// A client writes whatever it likes into `X-Forwarded-For`; each proxy
/// appends the address it received the request from. So the header is read
/// from the right: while a hop is one of your proxies, the next one to the
/// left is what that proxy saw. The first hop that is not a trusted proxy is
/// the client. The header is ignored entirely unless the TCP peer itself is
/// a trusted proxy (otherwise anyone could send one directly).
///
/// Only the header you name is read: a proxy that writes one passes the
/// others on as the client sent them, so reading them too would let a
/// client choose its address.
///
/// ```
/// use axum::http::HeaderMap;
/// use redlimit::http::{ProxyHeader, TrustedProxies};
///
/// let proxies = TrustedProxies::new(["10.0.0.0/8", "fd00::/8"])?;
/// let mut headers = HeaderMap::new();
/// // The client forged the first entry; the load balancer (10.0.0.2) saw 198.51.100.7.
/// headers.insert("x-forwarded-for", "1.2.3.4, 198.51.100.7, 10.0.0.2".parse().unwrap());
/// assert_eq!(proxies.client_ip("10.0.0.1".parse().unwrap(), &headers).to_string(), "198.51.100.7");
/// // Not sent by a proxy: the header is ignored.
/// assert_eq!(proxies.client_ip("203.0.113.5".parse().unwrap(), &headers).to_string(), "203.0.113.5");
///
/// // Proxies that write RFC 7239 `Forwarded` instead.
/// let proxies = proxies.header(ProxyHeader::Forwarded);
/// headers.insert("forwarded", r#"for=192.0.2.60;proto=https, for="[2001:db8::1]:4711""#.parse().unwrap());
/// assert_eq!(proxies.client_ip("10.0.0.1".parse().unwrap(), &headers).to_string(), "2001:db8::1");
///
/// assert!(TrustedProxies::new(["10.0.0.0/33"]).unwrap_err().to_string().contains("`10.0.0.0/33`"));
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<IpNet>,
    header: ProxyHeader,
}

/// Which header [`TrustedProxies`] reads the client's address from; the others are ignored.
///
/// ```
/// use axum::http::HeaderMap;
/// use redlimit::http::{ProxyHeader, TrustedProxies};
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "6.6.6.6".parse().unwrap());
/// headers.insert("x-real-ip", "198.51.100.7".parse().unwrap());
/// let peer = "10.0.0.1".parse().unwrap();
///
/// let proxies = TrustedProxies::new(["10.0.0.0/8"])?;
/// assert_eq!(proxies.client_ip(peer, &headers).to_string(), "6.6.6.6");
/// let proxies = proxies.header(ProxyHeader::XRealIp);
/// assert_eq!(proxies.client_ip(peer, &headers).to_string(), "198.51.100.7");
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProxyHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`, read from the right.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:4711"`: the
    /// `for=` of each element, read from the right as `X-Forwarded-For` is.
    Forwarded,
    /// `X-Real-IP: client`: one address your proxy sets (nginx's
    /// `proxy_set_header X-Real-IP $remote_addr`), believed as it stands.
    XRealIp,
}

impl TrustedProxies {
    /// No trusted proxy: the client is always the TCP peer.
    pub fn none() -> TrustedProxies {
        TrustedProxies::default()
    }

    /// Trusts these networks: `10.0.0.0/8`, `192.168.1.10` (one address),
    /// `fd00::/8`, `::1`. An entry that is not one is an error naming it.
    pub fn new<I, S>(networks: I) -> Result<TrustedProxies, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let networks = networks.into_iter().map(|n| parse_network(n.as_ref())).collect::<Result<_, _>>()?;
        Ok(TrustedProxies { networks, header: ProxyHeader::default() })
    }

    /// Reads the client's address from `header` (default
    /// [`ProxyHeader::XForwardedFor`]); no other header is read.
    pub fn header(mut self, header: ProxyHeader) -> TrustedProxies {
        self.header = header;
        self
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks.iter().any(|n| n.contains(&ip))
    }

    /// The client's address for a request received from `peer` with `headers`.
    ///
    /// - `peer` is not a trusted proxy: `peer` (the header is ignored).
    /// - otherwise each hop of the [`ProxyHeader`] from the right (several
    ///   header lines count as one list, in order): the first that is not a
    ///   trusted proxy is the client. `X-Forwarded-For` entries may carry a
    ///   port (`1.2.3.4:80`, `[2001:db8::1]:443`); a `Forwarded` hop is the
    ///   `for=` node of an element (`192.0.2.1`, `"192.0.2.1:80"`,
    ///   `"[2001:db8::1]:4711"`).
    /// - a hop that is not an address (`unknown`, an obfuscated `_name`, an
    ///   element without `for=`, garbage, an empty entry, bytes that are not
    ///   ASCII) stops the walk: the client is the trusted proxy that wrote
    ///   it, so nothing a client wrote further left is believed.
    /// - every hop trusted: the leftmost one.
    /// - `X-Real-IP`: its address when it holds exactly one, else the peer.
    ///
    /// IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) are read as IPv4.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.contains(peer) {
            return peer;
        }
        let lines = || headers.get_all(self.header_name()).iter().map(|v| v.as_bytes());
        match self.header {
            ProxyHeader::XForwardedFor => {
                let hops = lines().rev().flat_map(|line| line.split(|&b| b == b',').rev().map(parse_hop));
                self.walk(peer, hops)
            }
            ProxyHeader::Forwarded => {
                let hops = lines().rev().flat_map(|line| forwarded::nodes(line).into_iter().rev());
                self.walk(peer, hops)
            }
            ProxyHeader::XRealIp => {
                let mut values = lines();
                match (values.next().and_then(parse_hop), values.next()) {
                    (Some(ip), None) => ip,
                    _ => peer,
                }
            }
        }
    }

    fn header_name(&self) -> &'static str {
        match self.header {
            ProxyHeader::XForwardedFor => "x-forwarded-for",
            ProxyHeader::Forwarded => "forwarded",
            ProxyHeader::XRealIp => "x-real-ip",
        }
    }

    /// From `peer` leftwards through `hops` (rightmost first; `None` is not an address).
    fn walk(&self, peer: IpAddr, hops: impl Iterator<Item = Option<IpAddr>>) -> IpAddr {
        let mut client = peer;
        for hop in hops {
            match hop {
                Some(ip) if self.contains(ip) => client = ip,
                Some(ip) => return ip,
                None => return client,
            }
        }
        client
    }
}

fn parse_network(text: &str) -> Result<IpNet, Error> {
    let invalid = |why: &str| {
        Error::InvalidConfig(format!(
            "trusted proxy `{}`: {why}; write an address (`10.0.0.1`, `::1`) or a network (`10.0.0.0/8`, `fd00::/8`)",
            redlimit_grammar::quote(text)
        ))
    };
    let trimmed = text.trim();
    let (addr, has_prefix) = match trimmed.split_once('/') {
        Some((addr, _)) => (addr, true),
        None => (trimmed, false),
    };
    let addr: IpAddr = addr.parse().map_err(|_| invalid("not an IP address"))?;
    let network = if has_prefix {
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        trimmed
            .parse::<IpNet>()
            .map_err(|_| invalid(&format!("the prefix length must be a number from 0 to {bits}")))?
    } else {
        IpNet::from(addr)
    };
    // `::ffff:10.0.0.0/104` is the IPv4 network 10.0.0.0/8.
    match (network, addr.to_canonical()) {
        (IpNet::V6(v6), IpAddr::V4(v4)) => match v6.prefix_len().checked_sub(96) {
            Some(prefix) => Ok(IpNet::V4(Ipv4Net::new(v4, prefix).map_err(|_| invalid("a bad prefix"))?)),
            None => Err(invalid("an IPv4-mapped network needs a prefix length of at least 96")),
        },
        (network, _) => Ok(network),
    }
}

/// One `X-Forwarded-For` (or `X-Real-IP`) entry: an address, maybe with a port.
fn parse_hop(hop: &[u8]) -> Option<IpAddr> {
    let hop = std::str::from_utf8(hop).ok()?.trim();
    let ip = if let Some(rest) = hop.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        let (addr, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        addr.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6)?
    } else if let Ok(ip) = hop.parse::<IpAddr>() {
        ip
    } else {
        // `v4:port` (a bare IPv6 address has more than one colon and parsed above)
        let (addr, port) = hop.split_once(':')?;
        if !is_port(port) {
            return None;
        }
        addr.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)?
    };
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            client(trusted, "10.0.0.3", &[b"6.6.6.6, 198.51.100.7", b"172.16.4.4", b"10.0.0.2"]),
            "198.51.100.7"
        );
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
        let fwd =
            |trusted: &[&str], peer: &str, lines: &[&str]| client_by(ProxyHeader::Forwarded, trusted, peer, lines);
        let trusted = &["10.0.0.0/8", "fd00::/8"];
        assert_eq!(fwd(trusted, "203.0.113.5", &["for=198.51.100.7"]), "203.0.113.5", "not from a proxy");
        assert_eq!(fwd(trusted, "10.0.0.1", &["for=6.6.6.6, for=198.51.100.7;proto=https"]), "198.51.100.7");
        assert_eq!(fwd(trusted, "10.0.0.1", &["for=6.6.6.6, for=\"[2001:db8::1]:4711\", for=10.0.0.2"]), "2001:db8::1");
        assert_eq!(fwd(trusted, "10.0.0.1", &["for=6.6.6.6", "for=198.51.100.7", "for=\"[fd00::2]\""]), "198.51.100.7");
        assert_eq!(fwd(trusted, "10.0.0.1", &["for=10.1.1.1, for=10.0.0.2"]), "10.1.1.1", "every hop trusted");
        assert_eq!(fwd(trusted, "10.0.0.1", &[]), "10.0.0.1");
        // What is not an address stops the walk at the proxy that wrote it.
        for stop in ["for=unknown", "for=_hidden", "proto=https", ""] {
            assert_eq!(
                fwd(trusted, "10.0.0.1", &[&format!("for=6.6.6.6, {stop}, for=10.0.0.2")]),
                "10.0.0.2",
                "{stop:?}"
            );
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
        assert_eq!(
            proxies.clone().header(ProxyHeader::Forwarded).client_ip(peer, &headers).to_string(),
            "198.51.100.7"
        );
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
}
