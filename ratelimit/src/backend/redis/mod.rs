//! [`RedisBackend`]: one multiplexed, auto-reconnecting connection, the
//! scripts bound on it, and the limiters bound to it ([`RedisBound`]).

mod batches;
mod bound;
pub(crate) mod connection;
mod eval;
pub(crate) mod scripts;

use self::batches::batch::Batcher;
#[cfg(feature = "cluster")]
use self::batches::grouping;
use self::batches::grouping::Grouping;
use self::bound::RedisBound;
use self::connection::breaker::Breaker;
pub(crate) use self::connection::endpoint::{check_url, redact};
use self::connection::options::RedisOptions;
use self::connection::{endpoint, failure, Connection};
use self::eval::{Eval, ReplicaAcks};
use self::scripts::plan;
use self::scripts::registry::ScriptRegistry;
use super::{Backend, Binding, Bound};
use crate::error::Error;
use std::fmt;
use std::sync::Arc;

/// Decides on Redis: one `EVALSHA` per decision (or per batch of them),
/// whatever the number of strategies.
///
/// One multiplexed, reconnecting connection (redis-rs's `ConnectionManager`,
/// one per master of a cluster, or a Sentinel-resolved master's) serves every
/// limiter and task. There is one script per family of algorithm, whatever
/// the policies: a policy's numbers travel with each call, so binding a
/// limiter ([`Backend::bind`]) only works out what its calls send. A
/// family's first call loads its script (on every master of a cluster).
/// When Redis answers `NOSCRIPT` (after a restart, failover, resharding to
/// a new node or `SCRIPT FLUSH`), every script of this backend is loaded
/// again, once: the calls that meet it meanwhile wait for that one reload
/// and try again, instead of each sending `SCRIPT LOAD`.
#[derive(Clone)]
pub struct RedisBackend {
    connection: Connection,
    options: RedisOptions,
    /// The script calls of every limiter bound here.
    eval: Arc<Eval>,
    /// With batching on: the calls waiting at the same time, gathered.
    batcher: Option<Batcher>,
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
        let cross_slot = connection.is_cluster()
            && options.batching
            && tokio::time::timeout(bound, grouping::cross_slot_scripts(&connection)).await.unwrap_or(false);
        let grouping = grouping(
            &connection,
            #[cfg(feature = "cluster")]
            cross_slot,
        );
        let eval = Arc::new(Eval {
            connection: connection.clone(),
            breaker: Arc::new(Breaker::new(&connection)),
            response_timeout: options.response_timeout,
            retry_interval: options.retry_interval,
            registry: ScriptRegistry::new(grouping.crosses_slots()),
            acks: ReplicaAcks::of(&options),
        });
        let batcher = options.batching.then(|| Batcher::new(eval.clone(), grouping));
        Ok(RedisBackend { connection, options, eval, batcher })
    }

    /// Whether this backend talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.connection.is_cluster()
    }
}

/// How a backend's batches group calls: a cluster that takes scripts
/// across slots of one node batches per node (its scripts flagged so), else
/// per slot; one server, all together.
fn grouping(connection: &Connection, #[cfg(feature = "cluster")] cross_slot: bool) -> Grouping {
    #[cfg(feature = "cluster")]
    if connection.is_cluster() {
        return match cross_slot {
            true => Grouping::ByNode(connection.owners.clone()),
            false => Grouping::BySlot,
        };
    }
    #[cfg(not(feature = "cluster"))]
    let _ = connection;
    Grouping::Together
}

impl Backend for RedisBackend {
    /// Binds one limiter's policy: its plan (which script, the policy's
    /// numbers, the reply's decoder) and its key prefix, worked out once.
    /// Nothing is kept per policy on the backend or on Redis.
    fn bind(&self, limiter: Binding<'_>) -> Arc<dyn Bound> {
        let Binding { prefix, name, policy, server_clock } = limiter;
        let plan = plan::plan(policy, server_clock);
        Arc::new(RedisBound {
            eval: self.eval.clone(),
            batcher: self.batcher.clone(),
            calendar: scripts::calendar::CalendarPlans::of(policy, &plan),
            plan: Arc::new(plan),
            key_prefix: crate::key::key_prefix(prefix, policy, name),
            policy: policy.clone(),
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
