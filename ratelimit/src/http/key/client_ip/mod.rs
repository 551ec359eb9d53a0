//! The client's IP address behind trusted proxies: the rightmost hop of
//! `X-Forwarded-For` (or `Forwarded`, or `X-Real-IP`) that none of your
//! proxies wrote.

use super::forwarded::{self, is_port};
use crate::error::Error;
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
mod tests;
