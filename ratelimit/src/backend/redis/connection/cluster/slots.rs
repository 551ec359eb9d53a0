//! Learning a cluster's slot map (`CLUSTER SLOTS`): at start-up, after a
//! `MOVED`, after a node's failure, and every [`REFRESH_EVERY`]. Every
//! node known is asked at once and the first answer taken, so a node that
//! hangs never holds a lookup up; the lookups after start-up run in a task
//! of their own, one at a time.

use super::super::request::Request;
use super::nodes::no_answer;
use super::Cluster;
use redis::{ErrorKind, RedisError, RedisResult, Value};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the slot map is asked for with nothing else to prompt it: a
/// failover whose old master's keys get no call is learnt within this.
pub(super) const REFRESH_EVERY: Duration = Duration::from_secs(5);

impl Cluster {
    /// Asks every seed and every master known for the slot map at once,
    /// each within the connect and response timeouts,
    /// and learns the first answer that names a master.
    pub(super) async fn learn_slots(&self) -> RedisResult<()> {
        let mut asked = tokio::task::JoinSet::new();
        let mut indexes = self.owners.masters();
        indexes.extend(self.seeds.iter().filter(|seed| !indexes.contains(seed)).collect::<Vec<_>>());
        for node in indexes.into_iter().filter_map(|index| self.nodes.get(&self.owners, index)) {
            // Its connection may have to be made first.
            let bound = node.options().connect_timeout.saturating_add(node.options().response_timeout);
            asked.spawn(async move {
                let mut cmd = redis::cmd("CLUSTER");
                cmd.arg("SLOTS");
                match tokio::time::timeout(bound, node.request(Request::One(&cmd), true)).await {
                    Ok(reply) => reply.and_then(Value::extract_error).map(|reply| (reply, node.host().to_owned())),
                    Err(_) => Err(no_answer(format!("{} did not answer CLUSTER SLOTS within {bound:?}", node.name))),
                }
            });
        }
        let mut last = None;
        // Dropping the set ends the lookups still waiting.
        while let Some(answer) = asked.join_next().await {
            match answer {
                Ok(Ok((reply, host))) if self.owners.learn(&reply, &host) => return Ok(()),
                Ok(Ok(_)) => {
                    last = Some(RedisError::from((ErrorKind::UnexpectedReturnType, "CLUSTER SLOTS named no master")))
                }
                Ok(Err(e)) => last = Some(e),
                Err(e) => {
                    last = Some(RedisError::from((ErrorKind::Io, "a CLUSTER SLOTS lookup failed", e.to_string())))
                }
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((ErrorKind::ClusterConnectionNotFound, "no Redis Cluster node to ask"))
        }))
    }

    /// Learns the slot map again in a task of its own, unless one already is.
    pub(crate) fn refresh_later(self: &Arc<Cluster>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let cluster = self.clone();
        let refresh = async move {
            if let Err(e) = cluster.learn_slots().await {
                tracing::debug!(target: "redlimit", "could not learn which Redis Cluster node serves each slot: {e}");
            }
            cluster.refreshing.store(false, Ordering::Release);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(refresh)),
            Err(_) => self.refreshing.store(false, Ordering::Release),
        }
    }
}

/// Learns the slot map every [`REFRESH_EVERY`], for as long as the cluster lives.
pub(super) async fn periodically(cluster: Weak<Cluster>) {
    loop {
        tokio::time::sleep(REFRESH_EVERY).await;
        let Some(cluster) = cluster.upgrade() else { return };
        cluster.refresh_later();
    }
}
