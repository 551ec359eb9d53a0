//! [`Error`]: the store or configuration failed.

#[cfg(feature = "redis")]
use std::sync::Arc;
use std::time::Duration;

/// Why a limiter could not decide: configuration or store failures.
///
/// A denial is not an error of this kind: it is a [`Decision`](crate::Decision) with
/// `allowed == false`, or a [`RateLimited`](crate::RateLimited) on annotated functions.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A policy's parameters break a rule; the message names the rule.
    #[error("invalid rate limit policy: {0}")]
    InvalidPolicy(String),
    /// The store configuration (a URL, an option) is unusable.
    #[error("invalid rate limit store configuration: {0}")]
    InvalidConfig(String),
    /// The store did not answer in time; the call may or may not have been counted.
    #[error("rate limit store timed out after {0:?}")]
    Timeout(Duration),
    /// The store failed recently and is not asked again until its retry
    /// interval has passed (so callers fail fast instead of each waiting
    /// out a timeout); the message is the failure that opened that interval.
    #[error("rate limit store unavailable: {0}")]
    Unavailable(String),
    /// The store answered with an error or could not be reached.
    #[error("rate limit store error: {0}")]
    #[cfg(feature = "redis")]
    Store(Arc<redis::RedisError>),
    /// A script returned something other than its documented reply.
    #[error("rate limit script returned an unexpected reply: {0}")]
    Protocol(String),
    /// [`init`](crate::init) was called after the global store was already set.
    #[error("the global rate limit store is already initialised")]
    AlreadyInitialized,
}

impl Error {
    /// True for failures of reaching the store (timeouts, refused or dropped
    /// connections), as opposed to a wrong configuration or reply.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Timeout(_) | Error::Unavailable(_) => true,
            #[cfg(feature = "redis")]
            Error::Store(e) => {
                e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
            }
            _ => false,
        }
    }
}

#[cfg(feature = "redis")]
impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Store(Arc::new(e))
    }
}
