//! [`RedisBackend`]: one multiplexed, auto-reconnecting connection, the
//! scripts bound on it, and the limiters bound to it ([`RedisBound`]).

mod bound;
mod breaker;
mod connection;
pub(crate) mod counter;
mod endpoint;
mod failure;
mod idle;
pub(crate) mod options;
mod reply;
pub(crate) mod scripts;

use self::bound::RedisBound;
use self::breaker::Breaker;
use self::connection::Connection;
pub(crate) use self::endpoint::{check_url, redact};
use self::options::RedisOptions;
use self::scripts::Registry;
use super::{Backend, Binding, Bound};
use crate::Error;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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
