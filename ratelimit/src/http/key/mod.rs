//! [`KeyBy`]: what a request is counted under.
//!
//! The folder owns what chooses a request's key: the client's IP behind
//! trusted proxies (`client_ip/`, its tests beside it) and RFC 7239
//! `Forwarded` (`forwarded.rs`).

pub(super) mod client_ip;
mod forwarded;

use self::client_ip::TrustedProxies;
use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderName;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// What the layer does with a request whose [`KeyBy`] finds no key.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use axum::{body::Body, extract::Request, routing::get, Router};
/// use redlimit::http::{KeyBy, MissingKey, RateLimitLayer};
/// use redlimit::{Limiter, Policy, Store};
/// use tower_service::Service;
///
/// let limiter = Limiter::new("api", Policy::fixed_window("1/1m")?, &Store::memory());
/// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?);
/// let anonymous = || Request::builder().uri("/").body(Body::empty()).unwrap();
///
/// let mut strict = Router::new().route("/", get(|| async { "hi" })).layer(layer.clone());
/// assert_eq!(strict.call(anonymous()).await.unwrap().status(), 400);
/// let mut open = Router::new().route("/", get(|| async { "hi" })).layer(layer.missing_key(MissingKey::Allow));
/// for _ in 0..3 {
///     assert_eq!(open.call(anonymous()).await.unwrap().status(), 200, "not counted");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Answer `400 Bad Request` (problem+json) without calling the route: a
    /// client cannot escape the limit by leaving its key out.
    #[default]
    Reject,
    /// Let the request through, not counted (for example when anonymous
    /// requests are limited by another layer).
    Allow,
}

/// How [`RateLimitLayer`](super::RateLimitLayer) finds a request's key.
///
/// The key is handed to the limiter as it is; the limiter escapes (or
/// hashes, when long) it, so any bytes are safe. Keys are never logged.
///
/// ```
/// use axum::extract::{ConnectInfo, Request};
/// use redlimit::http::{KeyBy, TrustedProxies};
/// use std::net::SocketAddr;
///
/// let mut request = Request::builder().header("x-api-key", "k-123").body(axum::body::Body::empty()).unwrap();
/// request.extensions_mut().insert(ConnectInfo("198.51.100.7:50000".parse::<SocketAddr>().unwrap()));
///
/// assert_eq!(KeyBy::client_ip(TrustedProxies::none()).key(&request).unwrap().as_deref(), Some(&b"198.51.100.7"[..]));
/// assert_eq!(KeyBy::header("x-api-key")?.key(&request).unwrap().as_deref(), Some(&b"k-123"[..]));
/// assert_eq!(KeyBy::header("authorization")?.key(&request).unwrap(), None);
/// assert!(KeyBy::header("bad name").unwrap_err().to_string().contains("`bad name`"));
///
/// let by_path = KeyBy::function(|r: &Request| Some(r.uri().path().to_owned()));
/// assert_eq!(by_path.key(&request).unwrap().as_deref(), Some(&b"/"[..]));
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Clone)]
pub struct KeyBy(KeySource);

#[derive(Clone)]
enum KeySource {
    /// The proxies to see through, and how many leading bits of an IPv6 address are the client.
    ClientIp(TrustedProxies, u8),
    Header(HeaderName),
    Function(KeyFn),
}

/// A user's key function.
type KeyFn = Arc<dyn Fn(&Request) -> Option<String> + Send + Sync>;

/// A request that cannot be keyed because the server was not set up for it:
/// keyed by client IP, it carries no peer address (`ConnectInfo`).
///
/// ```
/// use axum::{body::Body, extract::Request};
/// use redlimit::http::{KeyBy, TrustedProxies};
///
/// let request = Request::builder().uri("/").body(Body::empty()).unwrap();
/// let missing = KeyBy::client_ip(TrustedProxies::none()).key(&request).unwrap_err();
/// assert!(missing.to_string().contains("into_make_service_with_connect_info"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingPeer;

impl fmt::Display for MissingPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "rate limiting by client IP needs the peer address: serve the router with \
             `into_make_service_with_connect_info::<SocketAddr>()` so requests carry `ConnectInfo<SocketAddr>`",
        )
    }
}

impl std::error::Error for MissingPeer {}

impl KeyBy {
    /// The client's IP address: the TCP peer (axum's `ConnectInfo<SocketAddr>`),
    /// or behind `proxies` the rightmost hop of their header (`X-Forwarded-For`,
    /// `Forwarded` or `X-Real-IP`: [`ProxyHeader`](super::ProxyHeader)) they
    /// did not write (see [`TrustedProxies::client_ip`]).
    ///
    /// An IPv4 client is its address. An IPv6 client is its /64 network
    /// (`2001:db8:1:2::/64`), because one subscriber is usually handed a
    /// whole /64 and could otherwise take a fresh address, and a fresh
    /// limit, for every request; [`ipv6_prefix`](Self::ipv6_prefix) changes
    /// the width.
    ///
    /// ```
    /// use axum::extract::{ConnectInfo, Request};
    /// use redlimit::http::{KeyBy, TrustedProxies};
    /// use std::net::SocketAddr;
    ///
    /// let from = |peer: &str| {
    ///     let mut request = Request::new(axum::body::Body::empty());
    ///     request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    ///     request
    /// };
    /// let by_ip = KeyBy::client_ip(TrustedProxies::none());
    /// let key = |request| String::from_utf8(by_ip.key(&request).unwrap().unwrap()).unwrap();
    /// assert_eq!(key(from("[2001:db8:1:2:aaaa::1]:443")), "2001:db8:1:2::/64");
    /// assert_eq!(key(from("[2001:db8:1:2:bbbb::9]:443")), "2001:db8:1:2::/64"); // the same client
    /// assert_eq!(key(from("[::ffff:198.51.100.7]:443")), "198.51.100.7"); // IPv4-mapped is IPv4
    ///
    /// let exact = KeyBy::client_ip(TrustedProxies::none()).ipv6_prefix(128)?;
    /// assert_eq!(exact.key(&from("[2001:db8:1:2:aaaa::1]:443")).unwrap().unwrap(), b"2001:db8:1:2:aaaa::1");
    /// assert!(KeyBy::client_ip(TrustedProxies::none()).ipv6_prefix(0).is_err());
    /// # Ok::<(), redlimit::Error>(())
    /// ```
    pub fn client_ip(proxies: TrustedProxies) -> KeyBy {
        KeyBy(KeySource::ClientIp(proxies, 64))
    }

    /// For [`client_ip`](Self::client_ip): how many leading bits of an IPv6
    /// address name one client (1 to 128; default 64, 128 = every address
    /// apart). Any other key is an error.
    pub fn ipv6_prefix(self, bits: u8) -> Result<KeyBy, crate::error::Error> {
        match self.0 {
            KeySource::ClientIp(proxies, _) if (1..=128).contains(&bits) => {
                Ok(KeyBy(KeySource::ClientIp(proxies, bits)))
            }
            KeySource::ClientIp(..) => {
                Err(crate::Error::InvalidConfig(format!("an IPv6 prefix of {bits} bits: give 1 to 128")))
            }
            _ => Err(crate::Error::InvalidConfig("an IPv6 prefix only applies to `KeyBy::client_ip`".into())),
        }
    }

    /// The value of header `name` (its raw bytes); a request without it has no key.
    /// A name that is not a valid header name is an error naming it.
    pub fn header(name: &str) -> Result<KeyBy, crate::error::Error> {
        HeaderName::try_from(name).map(|name| KeyBy(KeySource::Header(name))).map_err(|_| {
            crate::Error::InvalidConfig(format!("`{}` is not a valid HTTP header name", redlimit_grammar::quote(name)))
        })
    }

    /// Whatever `f` returns; `None` means the request has no key.
    pub fn function(f: impl Fn(&Request) -> Option<String> + Send + Sync + 'static) -> KeyBy {
        KeyBy(KeySource::Function(Arc::new(f)))
    }

    /// The key of `request`: `Ok(None)` when it has none (a missing header,
    /// a function returning `None`), `Err` when the client IP is asked for
    /// and the request carries no peer address.
    pub fn key(&self, request: &Request) -> Result<Option<Vec<u8>>, MissingPeer> {
        match &self.0 {
            KeySource::ClientIp(proxies, ipv6_prefix) => {
                let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>().ok_or(MissingPeer)?;
                Ok(Some(client_key(proxies.client_ip(peer.ip(), request.headers()), *ipv6_prefix).into_bytes()))
            }
            KeySource::Header(name) => Ok(request.headers().get(name).map(|v| v.as_bytes().to_vec())),
            KeySource::Function(f) => Ok(f(request).map(String::into_bytes)),
        }
    }

    /// What the key is, for messages (never the key itself).
    pub(crate) fn describe(&self) -> String {
        match &self.0 {
            KeySource::ClientIp(..) => "client IP".into(),
            KeySource::Header(name) => format!("header `{name}`"),
            KeySource::Function(_) => "key function".into(),
        }
    }
}

impl fmt::Debug for KeyBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            KeySource::ClientIp(proxies, ipv6_prefix) => {
                f.debug_tuple("ClientIp").field(proxies).field(ipv6_prefix).finish()
            }
            KeySource::Header(name) => f.debug_tuple("Header").field(name).finish(),
            KeySource::Function(_) => f.write_str("Function"),
        }
    }
}

/// The key of a client address: IPv4 as is, IPv6 as its network of
/// `prefix` bits (the address itself at 128).
fn client_key(ip: IpAddr, prefix: u8) -> String {
    match ip {
        IpAddr::V6(v6) if prefix < 128 => {
            let network = u128::from(v6) & (u128::MAX << (128 - u32::from(prefix)));
            format!("{}/{prefix}", Ipv6Addr::from(network))
        }
        ip => ip.to_string(),
    }
}
