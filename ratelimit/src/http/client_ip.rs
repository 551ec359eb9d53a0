//! The client's IP address behind trusted proxies: the rightmost
//! `X-Forwarded-For` hop that none of your proxies wrote.

use crate::Error;
use axum::http::HeaderMap;
use std::net::IpAddr;

/// The networks of your own reverse proxies, whose `X-Forwarded-For` entries are believed.
///
/// A client writes whatever it likes into `X-Forwarded-For`; each proxy
/// appends the address it received the request from. So the header is read
/// from the right: while a hop is one of your proxies, the next one to the
/// left is what that proxy saw. The first hop that is not a trusted proxy is
/// the client. The header is ignored entirely unless the TCP peer itself is
/// a trusted proxy (otherwise anyone could send one directly).
///
/// ```
/// use axum::http::HeaderMap;
/// use redlimit::http::TrustedProxies;
///
/// let proxies = TrustedProxies::new(["10.0.0.0/8", "fd00::/8"])?;
/// let mut headers = HeaderMap::new();
/// // The client forged the first entry; the load balancer (10.0.0.2) saw 198.51.100.7.
/// headers.insert("x-forwarded-for", "1.2.3.4, 198.51.100.7, 10.0.0.2".parse().unwrap());
/// assert_eq!(proxies.client_ip("10.0.0.1".parse().unwrap(), &headers).to_string(), "198.51.100.7");
/// // Not sent by a proxy: the header is ignored.
/// assert_eq!(proxies.client_ip("203.0.113.5".parse().unwrap(), &headers).to_string(), "203.0.113.5");
///
/// assert!(TrustedProxies::new(["10.0.0.0/33"]).unwrap_err().to_string().contains("`10.0.0.0/33`"));
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<Network>,
}

/// An address and the number of leading bits that must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Network {
    addr: IpAddr,
    prefix: u8,
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
        Ok(TrustedProxies { networks })
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks.iter().any(|n| n.contains(ip))
    }

    /// The client's address for a request received from `peer` with `headers`.
    ///
    /// - `peer` is not a trusted proxy: `peer` (the header is ignored).
    /// - otherwise each `X-Forwarded-For` entry from the right (several
    ///   header lines count as one list, in order): the first that is not a
    ///   trusted proxy is the client; entries may carry a port (`1.2.3.4:80`,
    ///   `[2001:db8::1]:443`).
    /// - an entry that is not an address (`unknown`, garbage, an empty
    ///   entry, bytes that are not ASCII) stops the walk: the client is the
    ///   trusted proxy that wrote it, so nothing a client wrote further left
    ///   is believed.
    /// - every entry trusted: the leftmost one.
    ///
    /// IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) are read as IPv4.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.contains(client) {
            return client;
        }
        let values: Vec<&[u8]> = headers.get_all("x-forwarded-for").iter().map(|v| v.as_bytes()).collect();
        for value in values.iter().rev() {
            for hop in value.split(|&b| b == b',').rev() {
                match parse_hop(hop) {
                    Some(ip) if self.contains(ip) => client = ip,
                    Some(ip) => return ip,
                    None => return client,
                }
            }
        }
        client
    }
}

impl Network {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u128::from(u32::from(net)), 32, self.prefix)
                    == masked(u128::from(u32::from(ip)), 32, self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), 128, self.prefix) == masked(u128::from(ip), 128, self.prefix)
            }
            _ => false,
        }
    }
}

/// The top `prefix` bits of a `bits`-bit address.
fn masked(addr: u128, bits: u8, prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        addr >> (bits - prefix)
    }
}

fn parse_network(text: &str) -> Result<Network, Error> {
    let invalid = |why: &str| {
        Error::InvalidConfig(format!(
            "trusted proxy `{}`: {why}; write an address (`10.0.0.1`, `::1`) or a network (`10.0.0.0/8`, `fd00::/8`)",
            redlimit_grammar::quote(text)
        ))
    };
    let (addr, prefix) = match text.trim().split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text.trim(), None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| invalid("not an IP address"))?;
    let bits = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => bits,
        Some(p) => match p.parse::<u8>() {
            Ok(p) if p <= bits => p,
            _ => return Err(invalid(&format!("the prefix length must be a number from 0 to {bits}"))),
        },
    };
    // `::ffff:10.0.0.0/104` is the IPv4 network 10.0.0.0/8.
    match addr.to_canonical() {
        IpAddr::V4(v4) if addr.is_ipv6() => match prefix.checked_sub(96) {
            Some(prefix) => Ok(Network { addr: IpAddr::V4(v4), prefix }),
            None => Err(invalid("an IPv4-mapped network needs a prefix length of at least 96")),
        },
        addr => Ok(Network { addr, prefix }),
    }
}

/// One `X-Forwarded-For` entry: an address, maybe with a port.
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

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit()) && text.parse::<u16>().is_ok()
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
        ] {
            let message = TrustedProxies::new([bad]).unwrap_err().to_string();
            assert!(message.contains(&format!("`{bad}`")) && message.contains(why), "{message}");
        }
    }
}
