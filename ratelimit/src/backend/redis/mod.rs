//! [`RedisBackend`]: one multiplexed, auto-reconnecting connection, the
//! scripts bound on it, and the limiters bound to it ([`RedisBound`]).

mod batch;
mod bound;
mod breaker;
mod connection;
pub(crate) mod counter;
mod endpoint;
mod eval;
mod failure;
mod grouping;
mod idle;
pub(crate) mod options;
mod reply;
pub(crate) mod scripts;

use self::batch::Batcher;
use self::bound::RedisBound;
use self::breaker::Breaker;
use self::connection::Connection;
pub(crate) use self::endpoint::{check_url, redact};
use self::eval::Eval;
use self::grouping::Grouping;
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
    /// On a cluster whose scripts may touch several slots of one node:
    /// which node serves each slot, to batch calls per node.
    #[cfg(feature = "cluster")]
    slot_map: Option<Arc<grouping::SlotMap>>,
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
        #[cfg(feature = "cluster")]
        let slot_map = match connection.is_cluster() && options.batching {
            true => cluster_slot_map(&connection, bound).await,
            false => None,
        };
        Ok(RedisBackend {
            connection,
            options,
            breaker: Arc::new(Breaker::new()),
            registry: Arc::default(),
            #[cfg(feature = "cluster")]
            slot_map,
        })
    }

    /// Whether this backend talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.connection.is_cluster()
    }
}

impl RedisBackend {
    /// How this backend's batches group calls: a cluster that takes
    /// scripts across slots of one node batches per node (its scripts
    /// flagged so), else per slot; one server, all together.
    fn grouping(&self) -> Grouping {
        #[cfg(feature = "cluster")]
        if self.connection.is_cluster() {
            return match &self.slot_map {
                Some(map) => Grouping::ByNode(map.clone()),
                None => Grouping::BySlot,
            };
        }
        Grouping::Together
    }
}

/// A cluster's slot map, when its scripts may cross slots of one node and
/// it answers within `bound`; else `None`, and batches go per slot.
#[cfg(feature = "cluster")]
async fn cluster_slot_map(connection: &Connection, bound: std::time::Duration) -> Option<Arc<grouping::SlotMap>> {
    let learn = async {
        if !grouping::cross_slot_scripts(connection).await {
            return None;
        }
        grouping::SlotMap::fetch(connection).await.ok()
    };
    tokio::time::timeout(bound, learn).await.ok().flatten()
}

impl Backend for RedisBackend {
    /// Binds one limiter: its script (chosen, made and registered here), its
    /// reply's decoder and its key prefix, once.
    fn bind(&self, limiter: Binding<'_>) -> Arc<dyn Bound> {
        let Binding { prefix, name, policy, server_clock } = limiter;
        let grouping = self.grouping();
        let made = scripts::make(policy, server_clock, grouping.crosses_slots());
        // The key's layout follows the script: a counter's state is not a window's.
        let counter = matches!(made.reply, reply::Reply::Counter(_));
        let eval = Arc::new(Eval {
            connection: self.connection.clone(),
            breaker: self.breaker.clone(),
            response_timeout: self.options.response_timeout,
            retry_interval: self.options.retry_interval,
            registry: self.registry.clone(),
            script: self.registry.register(&made.source),
            reply: made.reply,
            loaded: AtomicBool::new(false),
        });
        let batcher = self.options.batching.then(|| Batcher::new(eval.clone(), grouping));
        Arc::new(RedisBound { eval, batcher, key_prefix: crate::key::key_prefix(prefix, policy, name, counter) })
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
