//! [`Owners`]: which node serves a key, so a node's failure is remembered
//! for that node's keys only (`breaker.rs`). A single server or a Sentinel
//! master is one node; a cluster's nodes are the masters `CLUSTER SLOTS`
//! names, learnt at start-up in the background and again whenever a node
//! fails (it may have been failed over) or a slot moved.

use super::Connection;
#[cfg(feature = "cluster")]
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Mutex, PoisonError};
#[cfg(feature = "cluster")]
use std::time::Duration;

/// A slot no node is known to serve (not learnt yet, or unanswered).
#[cfg(feature = "cluster")]
const UNKNOWN: u32 = u32::MAX;

/// The most nodes one store tells apart; a node named after these has no
/// breaker, so its keys only lose failing fast. Node names are addresses,
/// so a cluster reaches this only by moving to that many addresses.
pub(crate) const MAX_NODES: usize = 1024;

/// Which node serves each key, and the nodes' names for the logs.
pub(crate) struct Owners {
    /// Per slot, the index of its master in `names`; empty for one node.
    node_of: Box<[AtomicU32]>,
    /// Node addresses seen so far; an index never changes meaning.
    names: Mutex<Vec<String>>,
    refreshing: AtomicBool,
}

impl Owners {
    /// One node, named `name`, serving every key.
    pub(crate) fn one(name: String) -> Owners {
        Owners { node_of: Box::new([]), names: Mutex::new(vec![name]), refreshing: AtomicBool::new(false) }
    }

    /// A cluster's masters, none known yet: call [`refresh_later`](Self::refresh_later).
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster() -> Owners {
        Owners {
            node_of: (0..super::SLOTS).map(|_| AtomicU32::new(UNKNOWN)).collect(),
            names: Mutex::default(),
            refreshing: AtomicBool::new(false),
        }
    }

    /// The index of the node serving `key`, or `None` while its slot's is unknown.
    pub(crate) fn owner(&self, key: &[u8]) -> Option<usize> {
        if self.node_of.is_empty() {
            return Some(0);
        }
        #[cfg(feature = "cluster")]
        {
            let node = self.node_of.get(usize::from(super::slot(key)))?.load(Ordering::Relaxed);
            (node != UNKNOWN).then_some(node as usize)
        }
        #[cfg(not(feature = "cluster"))]
        {
            let _ = key;
            None
        }
    }

    /// The name (address) of node `index`.
    pub(crate) fn name(&self, index: usize) -> String {
        let names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        names.get(index).cloned().unwrap_or_else(|| "an unknown node".to_owned())
    }

    /// Learns again which master serves each slot, in a task of its own,
    /// unless one already is; a store of one node has nothing to learn.
    pub(crate) fn refresh_later(self: &Arc<Owners>, connection: &Connection) {
        #[cfg(feature = "cluster")]
        if !self.node_of.is_empty() && !self.refreshing.swap(true, Ordering::AcqRel) {
            let (owners, connection) = (self.clone(), connection.clone());
            let refresh = async move {
                if let Err(e) = owners.refresh(connection).await {
                    tracing::debug!(target: "redlimit", "could not learn which Redis Cluster node serves each slot: {e}");
                }
                owners.refreshing.store(false, Ordering::Release);
            };
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(refresh)),
                Err(_) => self.refreshing.store(false, Ordering::Release),
            }
        }
        #[cfg(not(feature = "cluster"))]
        let _ = (connection, &self.refreshing);
    }

    /// Asks a node or two `CLUSTER SLOTS`, each bounded: the node asked may
    /// be the one that is down, which must not keep the others' map stale.
    #[cfg(feature = "cluster")]
    async fn refresh(&self, mut connection: Connection) -> redis::RedisResult<()> {
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let mut cmd = redis::cmd("CLUSTER");
            cmd.arg("SLOTS");
            let asked = cmd.query_async::<redis::Value>(&mut connection);
            match tokio::time::timeout(ATTEMPT_BOUND, asked).await {
                Ok(Ok(reply)) => {
                    self.learn(&reply);
                    return Ok(());
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => last = Some(redis::RedisError::from((redis::ErrorKind::Io, "no answer to CLUSTER SLOTS"))),
            }
        }
        Err(last.unwrap_or_else(|| redis::RedisError::from((redis::ErrorKind::Io, "CLUSTER SLOTS not asked"))))
    }

    #[cfg(feature = "cluster")]
    fn learn(&self, reply: &redis::Value) {
        let redis::Value::Array(ranges) = reply else { return };
        for (first, last, node) in ranges.iter().filter_map(parse_range) {
            let Some(index) = self.index_of(node) else { continue };
            for slot in first..=last.min(super::SLOTS - 1) {
                self.node_of[slot].store(index, Ordering::Relaxed);
            }
        }
    }

    #[cfg(feature = "cluster")]
    fn index_of(&self, node: String) -> Option<u32> {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = names.iter().position(|known| *known == node) {
            return u32::try_from(index).ok();
        }
        if names.len() >= MAX_NODES {
            return None;
        }
        names.push(node);
        u32::try_from(names.len() - 1).ok()
    }
}

/// `CLUSTER SLOTS` is asked this many times, each on a random node, within this bound each.
#[cfg(feature = "cluster")]
const ATTEMPTS: usize = 3;
#[cfg(feature = "cluster")]
const ATTEMPT_BOUND: Duration = Duration::from_secs(1);

/// One entry of `CLUSTER SLOTS`: `[first, last, [ip, port, ..], replicas..]`,
/// its master named by address (what an operator recognises in a log).
#[cfg(feature = "cluster")]
fn parse_range(range: &redis::Value) -> Option<(usize, usize, String)> {
    use redis::Value;
    let Value::Array(fields) = range else { return None };
    let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
        (fields.first(), fields.get(1), fields.get(2))
    else {
        return None;
    };
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Some(Value::SimpleString(s)) => Some(s.clone()),
        Some(Value::Int(n)) => Some(n.to_string()),
        _ => None,
    };
    let node = format!("{}:{}", text(master.first())?, text(master.get(1))?);
    Some((usize::try_from(*first).ok()?, usize::try_from(*last).ok()?, node))
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn a_key_belongs_to_the_master_of_its_slot() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let range = |first, last, port| {
            Value::Array(vec![
                Value::Int(first),
                Value::Int(last),
                Value::Array(vec![bulk("10.0.0.1"), Value::Int(port)]),
            ])
        };
        let owners = Owners::cluster();
        assert_eq!(owners.owner(b"foo"), None, "nothing learnt yet");
        owners.learn(&Value::Array(vec![range(0, 8191, 7000), range(8192, 16383, 7001)]));
        // `foo` is in slot 12182, `123456789` in 12739 and `a` in 15495: all the second master's.
        assert_eq!(owners.owner(b"foo"), Some(1));
        assert_eq!(owners.owner(b"{user1000}.x"), owners.owner(b"user1000"));
        assert_eq!(owners.name(1), "10.0.0.1:7001");
        // A failover: the same slots, another master, another node.
        owners.learn(&Value::Array(vec![range(8192, 16383, 7004)]));
        assert_eq!((owners.owner(b"foo"), owners.name(2).as_str()), (Some(2), "10.0.0.1:7004"));
        assert_eq!(Owners::one("x".to_owned()).owner(b"anything"), Some(0));
    }
}
