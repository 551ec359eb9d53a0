//! [`Cluster`]: Redis Cluster, routed here: one connection per master, each
//! request sent on the connection of its key's master as the slot map says
//! (`slots.rs`), `MOVED` and `ASK` followed (`routing.rs`).
//!
//! Why not redis-rs's cluster client: when a node fails it learns the
//! slots again and reconnects to every node while holding the lock every
//! request takes, so a node that hangs (stopped, not crashed: its socket
//! stays open, its connect is accepted and never answered) holds up every
//! other node's requests until its own timeouts pass, and its start-up
//! needs every node to answer. None of its settings changes that. Here a
//! node's connection is made by its own first request, apart from every
//! other's (`nodes.rs`); the slot map is asked of every node at once and
//! the first answer taken; no lock is held across a wait; so a node that
//! hangs holds up the requests sent to it only, and those the caller's
//! response timeout bounds (then the node's breaker fails them fast).

mod nodes;
mod routing;
mod slots;

use self::nodes::{Nodes, Settings};
use super::owners::Owners;
use super::watch::DataWatch;
use super::{manager_config, RedisOptions};
use redis::{ConnectionInfo, ErrorKind, RedisError, RedisResult};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub(crate) struct Cluster {
    /// The slot map: which node serves each slot, by index.
    owners: Arc<Owners>,
    /// Every node named so far, by the same index.
    nodes: Nodes,
    /// The seeds' indexes: asked for the slot map with the masters.
    seeds: Vec<usize>,
    /// A slot map lookup is running in the background.
    refreshing: AtomicBool,
    /// The periodic lookup, ended with this.
    periodic: std::sync::Mutex<Option<tokio::task::AbortHandle>>,
}

impl Cluster {
    /// Learns the slot map from the first of `seeds` to answer, and starts
    /// asking for it again periodically.
    pub(super) async fn connect(
        seeds: Vec<ConnectionInfo>,
        options: &RedisOptions,
        owners: Arc<Owners>,
        watch: Arc<DataWatch>,
    ) -> RedisResult<Arc<Cluster>> {
        let Some(template) = seeds.first().cloned() else {
            return Err(RedisError::from((ErrorKind::InvalidClientConfig, "a cluster URL names no node")));
        };
        let seeds = seeds.iter().filter_map(Nodes::name_of).filter_map(|name| owners.index_of(&name)).collect();
        let settings = Settings { template, options: options.clone(), config: manager_config(options), watch };
        let cluster = Arc::new(Cluster {
            owners,
            nodes: Nodes::new(settings),
            seeds,
            refreshing: AtomicBool::new(false),
            periodic: Default::default(),
        });
        cluster.learn_slots().await?;
        let periodic = tokio::spawn(slots::periodically(Arc::downgrade(&cluster))).abort_handle();
        *cluster.periodic.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(periodic);
        Ok(cluster)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(periodic) = self.periodic.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            periodic.abort();
        }
    }
}
