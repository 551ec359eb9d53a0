//! [`RedisBackend`]: one multiplexed, auto-reconnecting connection, the
//! scripts bound on it, and the limiters bound to it ([`RedisBound`]).

mod bound;
mod breaker;
mod connection;
pub(crate) mod counter;
mod endpoint;
mod failure;
mod idle;
mod reply;
pub(crate) mod scripts;

use self::bound::RedisBound;
use self::breaker::Breaker;
use self::connection::Connection;
pub(crate) use self::endpoint::{check_url, redact};
use self::scripts::Registry;
use super::{Backend, Binding, Bound};
use crate::Error;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Timeouts and retry settings of the Redis connection. Every default is set
/// here explicitly rather than inherited from redis-rs.
///
/// Each duration is from 1 ms to 1 hour ([`RedisOptions::MAX_DURATION`]),
/// and `reconnect_retries` at most [`RedisOptions::MAX_RECONNECT_RETRIES`]:
/// [`Store::redis_with`](crate::Store::redis_with) rejects anything else
/// with an [`Error::InvalidConfig`] naming the field, rather than
/// overflowing or turning a safeguard off.
///
/// ```
/// use redlimit::RedisOptions;
/// use std::time::Duration;
///
/// assert!(RedisOptions::default().validate().is_ok());
/// let forever = RedisOptions { retry_interval: Duration::MAX, ..RedisOptions::default() };
/// let error = forever.validate().unwrap_err().to_string();
/// assert!(error.contains("retry_interval"), "{error}");
/// ```
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Bound on establishing a connection (default 1 s): the whole of
    /// [`Store::redis`](crate::Store::redis), retries of a refused connect
    /// included, and of each reconnect attempt. Start-up fails with a clear
    /// error after this, instead of hanging.
    pub connect_timeout: Duration,
    /// Bound on one decision's round trip (default 250 ms), a wait for a
    /// reconnect or a script reload included. A call that takes longer is an
    /// [`Error::Timeout`]; it may still have run on the server, so it is
    /// never counted as a permit.
    pub response_timeout: Duration,
    /// Reconnect attempts after the connection drops (default 3, backing
    /// off from 50 ms); calls wait for them within their response timeout.
    pub reconnect_retries: usize,
    /// After a failure to reach Redis, calls fail at once with
    /// [`Error::Unavailable`] for this long (default 250 ms) instead of each
    /// waiting out a timeout; then the next call tries Redis again.
    pub retry_interval: Duration,
    /// PEM certificate(s) of a private certificate authority to trust for
    /// the Redis nodes of `rediss://`, `rediss+cluster://` and
    /// `rediss+sentinel://` (default: none, the system's roots). Sentinels
    /// themselves are reached over plain TCP.
    #[cfg(feature = "tls")]
    pub tls_root_cert: Option<Vec<u8>>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_millis(250),
            reconnect_retries: 3,
            retry_interval: Duration::from_millis(250),
            #[cfg(feature = "tls")]
            tls_root_cert: None,
        }
    }
}

impl RedisOptions {
    /// The longest duration any field takes.
    pub const MAX_DURATION: Duration = Duration::from_secs(3600);
    /// The shortest duration any field takes.
    pub const MIN_DURATION: Duration = Duration::from_millis(1);
    /// The most reconnect attempts `reconnect_retries` takes.
    pub const MAX_RECONNECT_RETRIES: usize = 100;

    /// `Ok` when every field is within its bounds; else an
    /// [`Error::InvalidConfig`] naming the first field that is not.
    pub fn validate(&self) -> Result<(), Error> {
        let durations = [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
            ("retry_interval", self.retry_interval),
        ];
        for (field, value) in durations {
            if !(Self::MIN_DURATION..=Self::MAX_DURATION).contains(&value) {
                return Err(Error::InvalidConfig(format!(
                    "invalid RedisOptions: `{field}` is {value:?}; it must be from {:?} to {:?}",
                    Self::MIN_DURATION,
                    Self::MAX_DURATION
                )));
            }
        }
        if self.reconnect_retries > Self::MAX_RECONNECT_RETRIES {
            return Err(Error::InvalidConfig(format!(
                "invalid RedisOptions: `reconnect_retries` is {}; it must be at most {}",
                self.reconnect_retries,
                Self::MAX_RECONNECT_RETRIES
            )));
        }
        Ok(())
    }
}

/// Decides on Redis: one `EVALSHA` of the limiter's own script per
/// decision, whatever the number of strategies.
///
/// One multiplexed, reconnecting connection (redis-rs's `ConnectionManager`,
/// its cluster connection, or a Sentinel-resolved master) serves every
/// limiter and task. Binding a limiter ([`Backend::bind`])
/// makes its script, with the policy's constants written in, and registers
/// it with this backend; its first call loads it (on every master of a
/// cluster). When Redis answers `NOSCRIPT` (after a restart, failover,
/// resharding to a new node or `SCRIPT FLUSH`), every script registered
/// here is loaded again, once: the calls that meet it meanwhile wait for
/// that one reload and try again, instead of each sending `SCRIPT LOAD`.
#[derive(Clone)]
pub struct RedisBackend {
    connection: Connection,
    options: RedisOptions,
    breaker: Arc<Breaker>,
    registry: Arc<Registry>,
}

impl RedisBackend {
    /// Connects to `url` (any form [`Store::redis`](crate::Store::redis)
    /// documents).
    pub async fn connect(url: &str, options: RedisOptions) -> Result<RedisBackend, Error> {
        options.validate()?;
        let endpoint = endpoint::parse(url)?;
        // redis-rs retries a refused first connect, each attempt bounded by
        // the connect timeout: the whole start-up gets that one bound.
        let bound = options.connect_timeout;
        // Boxed: the connect future is deep, and callers await it inline.
        let connect = Box::pin(Connection::connect(endpoint, &options));
        let connection = match tokio::time::timeout(bound, connect).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(e)) => return Err(failure::connect_failed(&redact(url), e)),
            Err(_) => {
                return Err(Error::Connection(crate::error::Failure::new(format!(
                    "cannot connect to Redis at {}: no answer within {bound:?}",
                    redact(url)
                ))))
            }
        };
        Ok(RedisBackend { connection, options, breaker: Arc::new(Breaker::new()), registry: Arc::default() })
    }

    /// Whether this backend talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.connection.is_cluster()
    }
}

impl Backend for RedisBackend {
    /// Binds one limiter: its script (chosen, made and registered here), its
    /// reply's decoder and its key prefix, once.
    fn bind(&self, limiter: Binding<'_>) -> Arc<dyn Bound> {
        let Binding { prefix, name, policy, server_clock } = limiter;
        let made = scripts::make(policy, server_clock);
        // The key's layout follows the script: a counter's state is not a window's.
        let counter = matches!(made.reply, reply::Reply::Counter(_));
        Arc::new(RedisBound {
            connection: self.connection.clone(),
            breaker: self.breaker.clone(),
            response_timeout: self.options.response_timeout,
            retry_interval: self.options.retry_interval,
            registry: self.registry.clone(),
            script: self.registry.register(&made.source),
            reply: made.reply,
            key_prefix: crate::key::key_prefix(prefix, policy, name, counter),
            loaded: AtomicBool::new(false),
        })
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend").field("options", &self.options).finish_non_exhaustive()
    }
}
