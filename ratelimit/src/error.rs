//! [`Error`]: the store or configuration failed, classified by what happened.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a limiter could not decide: configuration or store failures.
///
/// A denial is not an error of this kind: it is a [`Decision`](crate::Decision) with
/// `allowed == false`, or a [`RateLimited`](crate::RateLimited) on annotated functions.
///
/// Each message reads as one sentence and never shows a password. The
/// store's own error, when there is one, is reachable through
/// [`source`](std::error::Error::source) (opaque: only its text and its own
/// sources are part of this crate's API).
///
/// ```
/// # #[cfg(feature = "redis")]
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{Error, Store};
///
/// let error = Store::redis("redis://app:s3cret@127.0.0.1:x").await.unwrap_err();
/// assert!(matches!(error, Error::InvalidConfig(_)));
/// assert_eq!(error.to_string(), "invalid Redis URL redis://app:***@127.0.0.1:x: invalid port `x` in `127.0.0.1:x`");
/// assert!(!error.is_unavailable());
/// # }
/// # #[cfg(not(feature = "redis"))] fn main() {}
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A policy's parameters break a rule; the message names the rule.
    InvalidPolicy(String),
    /// The configuration is unusable: a malformed store URL (the message
    /// names the wrong part), an option out of its bounds.
    InvalidConfig(String),
    /// The store could not be reached: the connection was refused, reset or
    /// dropped, a host name did not resolve, a TLS handshake failed, or no
    /// connection was made within the connect timeout.
    Connection(Failure),
    /// The store refused the credentials (a wrong user or password, none
    /// given where one is needed: `WRONGPASS`, `NOAUTH`) or the user may not
    /// run what the limiter sends (`NOPERM`).
    Auth(Failure),
    /// The store was reached and answered the call with an error.
    Server(Failure),
    /// The store did not answer in time; the call may or may not have been counted.
    Timeout(Duration),
    /// The store failed recently and is not asked again until its retry
    /// interval has passed (so callers fail fast instead of each waiting
    /// out a timeout), or is still being connected to; the message says which
    /// failure that was.
    Unavailable(Failure),
    /// A script returned something other than its documented reply.
    Protocol(String),
    /// [`init`](crate::init) was called after the global store was already set.
    AlreadyInitialized,
    /// The call was made in a way no store can decide, and the message says
    /// how to make it: `check` on a concurrency limiter (which holds permits
    /// only through `acquire`), or a call that reached the global store
    /// nobody set while a test's [`Scope`](crate::Scope) is live. Never
    /// settled by `on_error` nor let through by a dry run: `limit`, `wait`
    /// and annotated functions deny it ([`DenialReason::Misused`](crate::DenialReason::Misused)).
    Misuse(String),
}

/// What went wrong, in words, and the error it came from when there is one:
/// the payload of [`Error`]'s store failures. Its text is the error's
/// message; the error it came from is [`Error`]'s
/// [`source`](std::error::Error::source).
///
/// ```
/// # #[cfg(feature = "redis")]
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{Error, Store};
///
/// let vacant = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
/// match Store::redis(&format!("redis://127.0.0.1:{vacant}")).await {
///     Err(Error::Connection(failure)) => {
///         assert!(failure.to_string().starts_with(&format!("cannot connect to Redis at redis://127.0.0.1:{vacant}")))
///     }
///     other => panic!("{other:?}"),
/// }
/// # }
/// # #[cfg(not(feature = "redis"))] fn main() {}
/// ```
#[derive(Clone)]
pub struct Failure {
    message: Arc<str>,
    source: Option<Cause>,
}

/// The original error behind a [`Failure`]: shown and chained, never named.
#[derive(Clone)]
struct Cause(Arc<dyn StdError + Send + Sync>);

// Only the Redis store fails this way; a memory-only build makes none.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
impl Failure {
    /// A failure with no error behind it.
    pub(crate) fn new(message: impl Into<String>) -> Failure {
        Failure { message: message.into().into(), source: None }
    }

    /// A failure described by `message`, caused by `source`.
    pub(crate) fn caused_by(message: impl Into<String>, source: impl StdError + Send + Sync + 'static) -> Failure {
        Failure { message: message.into().into(), source: Some(Cause(Arc::new(source))) }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for Cause {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidPolicy(why) => write!(f, "invalid rate limit policy: {why}"),
            Error::InvalidConfig(why) | Error::Misuse(why) => f.write_str(why),
            Error::Connection(failure)
            | Error::Auth(failure)
            | Error::Server(failure)
            | Error::Unavailable(failure) => failure.fmt(f),
            Error::Timeout(after) => write!(f, "the rate limit store did not answer within {after:?}"),
            Error::Protocol(why) => write!(f, "a rate limit script returned an unexpected reply: {why}"),
            Error::AlreadyInitialized => f.write_str("the global rate limit store is already initialised"),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Connection(failure)
            | Error::Auth(failure)
            | Error::Server(failure)
            | Error::Unavailable(failure) => failure.source.as_ref().map(|source| source as &(dyn StdError + 'static)),
            _ => None,
        }
    }
}

impl Error {
    /// True for failures of reaching the store (timeouts, refused, reset or
    /// dropped connections, the fail-fast interval after one), as opposed to
    /// a wrong configuration, wrong credentials or a reply.
    ///
    /// ```
    /// # #[cfg(feature = "redis")]
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let vacant = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    /// let error = redlimit::Store::redis(&format!("redis://127.0.0.1:{vacant}")).await.unwrap_err();
    /// assert!(matches!(error, redlimit::Error::Connection(_)), "{error:?}");
    /// assert!(error.is_unavailable());
    /// # }
    /// # #[cfg(not(feature = "redis"))] fn main() {}
    /// ```
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Connection(_) | Error::Timeout(_) | Error::Unavailable(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_once_and_the_source_is_chained() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = Error::Connection(Failure::caused_by("cannot connect to Redis at redis://h:1: refused", io));
        assert_eq!(error.to_string(), "cannot connect to Redis at redis://h:1: refused");
        assert_eq!(error.source().unwrap().to_string(), "refused");
        let fast = Error::Unavailable(Failure::caused_by(format!("{error} (not asked again for 250ms)"), error));
        assert_eq!(fast.to_string(), "cannot connect to Redis at redis://h:1: refused (not asked again for 250ms)");
        assert!(fast.is_unavailable());
        assert!(!Error::Auth(Failure::new("WRONGPASS")).is_unavailable());
        assert!(Error::Timeout(Duration::from_millis(250)).is_unavailable());
    }
}
