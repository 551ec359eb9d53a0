//! [`KeyBy`]: what a request is counted under.

use super::client_ip::TrustedProxies;
use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderName;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// How [`RateLimitLayer`](super::RateLimitLayer) finds a request's key.
///
/// The key is handed to the limiter as it is; the limiter escapes (or
/// hashes, when long) it, so any bytes are safe. Keys are never logged.
///
/// ```
/// use axum::extract::{ConnectInfo, Request};
/// use ratelimit::http::{KeyBy, TrustedProxies};
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
/// # Ok::<(), ratelimit::Error>(())
/// ```
#[derive(Clone)]
pub struct KeyBy(Source);

#[derive(Clone)]
enum Source {
    ClientIp(TrustedProxies),
    Header(HeaderName),
    Function(KeyFn),
}

/// A user's key function.
type KeyFn = Arc<dyn Fn(&Request) -> Option<String> + Send + Sync>;

/// A request that cannot be keyed because the server was not set up for it.
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
    /// or behind `proxies` the rightmost `X-Forwarded-For` hop they did not
    /// write (see [`TrustedProxies::client_ip`]).
    pub fn client_ip(proxies: TrustedProxies) -> KeyBy {
        KeyBy(Source::ClientIp(proxies))
    }

    /// The value of header `name` (its raw bytes); a request without it has no key.
    /// A name that is not a valid header name is an error naming it.
    pub fn header(name: &str) -> Result<KeyBy, crate::Error> {
        HeaderName::try_from(name)
            .map(|name| KeyBy(Source::Header(name)))
            .map_err(|_| crate::Error::InvalidConfig(format!("`{name}` is not a valid HTTP header name")))
    }

    /// Whatever `f` returns; `None` means the request has no key.
    pub fn function(f: impl Fn(&Request) -> Option<String> + Send + Sync + 'static) -> KeyBy {
        KeyBy(Source::Function(Arc::new(f)))
    }

    /// The key of `request`: `Ok(None)` when it has none (a missing header,
    /// a function returning `None`), `Err` when the client IP is asked for
    /// and the request carries no peer address.
    pub fn key(&self, request: &Request) -> Result<Option<Vec<u8>>, MissingPeer> {
        match &self.0 {
            Source::ClientIp(proxies) => {
                let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>().ok_or(MissingPeer)?;
                Ok(Some(proxies.client_ip(peer.ip(), request.headers()).to_string().into_bytes()))
            }
            Source::Header(name) => Ok(request.headers().get(name).map(|v| v.as_bytes().to_vec())),
            Source::Function(f) => Ok(f(request).map(String::into_bytes)),
        }
    }

    /// What the key is, for messages (never the key itself).
    pub(crate) fn describe(&self) -> String {
        match &self.0 {
            Source::ClientIp(_) => "client IP".into(),
            Source::Header(name) => format!("header `{name}`"),
            Source::Function(_) => "key function".into(),
        }
    }
}

impl fmt::Debug for KeyBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::ClientIp(proxies) => f.debug_tuple("ClientIp").field(proxies).finish(),
            Source::Header(name) => f.debug_tuple("Header").field(name).finish(),
            Source::Function(_) => f.write_str("Function"),
        }
    }
}
