//! [`Store`]: a backend, the clock that drives it, and the key prefix.

pub(crate) mod releasing;

use crate::backend::{Backend, MemoryBackend};
#[cfg(feature = "redis")]
use crate::backend::{RedisBackend, RedisOptions};
use crate::clock::{Clock, ServerClock};
#[cfg(feature = "redis")]
use crate::error::Error;
use std::fmt;
use std::sync::Arc;

/// Where decisions are made: a shared handle (cheap to clone) to a backend,
/// the clock that drives it and the prefix of every key it writes.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, Policy, Store};
///
/// let store = Store::memory();
/// let limiter = Limiter::new("api", Policy::token_bucket(3, "1/1s")?, &store);
/// assert_eq!(limiter.check("k", 1).await?.remaining, 2);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Store {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) prefix: Arc<str>,
    /// Dropped permits' releases on their way, which acquisitions wait for.
    pub(crate) releasing: Arc<crate::store::releasing::Releasing>,
}

impl Store {
    /// The default key prefix: keys read `redlimit:<algo>/v<n>:<name length>:<name>:<key>`.
    pub const DEFAULT_PREFIX: &'static str = "redlimit";

    /// An in-process store: no Redis needed, limits are per process.
    pub fn memory() -> Store {
        Store::from_backend(Arc::new(MemoryBackend::new()))
    }

    /// Connects to Redis (`redis://[user:password@]host:port[/db]`) with the
    /// default [`RedisOptions`], and checks its credentials (the scripts
    /// load with the first call of each family of algorithm).
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub async fn redis(url: &str) -> Result<Store, Error> {
        Store::redis_with(url, RedisOptions::default()).await
    }

    /// Connects to Redis with explicit timeouts.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub async fn redis_with(url: &str, options: RedisOptions) -> Result<Store, Error> {
        Ok(Store::from_backend(Arc::new(RedisBackend::connect(url, options).await?)))
    }

    /// Wraps any backend; the clock defaults to [`ServerClock`]. Not a
    /// public API: the backend traits are internal.
    #[doc(hidden)]
    pub fn from_backend(backend: Arc<dyn Backend>) -> Store {
        let releasing = Arc::default();
        Store { backend, clock: Arc::new(ServerClock), prefix: Store::DEFAULT_PREFIX.into(), releasing }
    }

    /// Uses `clock` for every decision (e.g. a [`ManualClock`](crate::ManualClock) in tests).
    pub fn with_clock(mut self, clock: impl Clock) -> Store {
        self.clock = Arc::new(clock);
        self
    }

    /// Changes the prefix of every key (to share one Redis between applications).
    ///
    /// Any text will do: in keys, `%` and `:` are written `%25` and `%3A`, so
    /// that no prefix, limiter name and key can spell the key of another
    /// (`app:eu` gives keys starting `app%3Aeu:`; `app-eu` keys starting `app-eu:`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, Policy, Store};
    ///
    /// let store = Store::memory();
    /// let eu = Limiter::new("api", Policy::fixed_window("1/1m")?, &store.clone().with_prefix("app:eu"));
    /// let us = Limiter::new("api", Policy::fixed_window("1/1m")?, &store.with_prefix("app:us"));
    /// assert_eq!(eu.check("k", 1).await?.remaining, 0);
    /// assert_eq!(us.check("k", 1).await?.remaining, 0, "a count of its own");
    /// # Ok(()) }
    /// ```
    pub fn with_prefix(mut self, prefix: &str) -> Store {
        self.prefix = prefix.into();
        self
    }

    /// Which store decides: `"memory"` or `"redis"` (any form of Redis URL).
    ///
    /// ```
    /// use redlimit::Store;
    ///
    /// assert_eq!(Store::memory().kind(), "memory");
    /// assert!(!Store::memory().is_redis());
    /// ```
    pub fn kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Whether the store is Redis (a single server, a cluster or through Sentinel).
    pub fn is_redis(&self) -> bool {
        self.kind() == "redis"
    }

    /// The clock decisions are made by.
    ///
    /// ```
    /// use redlimit::{ManualClock, Store};
    ///
    /// let clock = ManualClock::starting_at(1_000_000);
    /// assert_eq!(Store::memory().with_clock(clock).clock().now_us(), Some(1_000_000));
    /// assert_eq!(Store::memory().clock().now_us(), None, "the store's own clock");
    /// ```
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend.kind())
            .field("clock", &self.clock)
            .field("prefix", &self.prefix)
            .finish()
    }
}
