//! [`Owners`]: which node serves a key: the slot map requests are routed
//! by (`cluster/`), and what a node's failure is remembered by, for that
//! node's keys only (`breaker.rs`). A single server or a Sentinel master is
//! one node; a cluster's nodes are the masters `CLUSTER SLOTS` names (how
//! and when it is asked: `cluster/slots.rs`), and the seeds it was given.

use std::sync::atomic::AtomicU32;
#[cfg(feature = "cluster")]
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

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
}

impl Owners {
    /// One node, named `name`, serving every key.
    pub(crate) fn one(name: String) -> Owners {
        Owners { node_of: Box::new([]), names: Mutex::new(vec![name]) }
    }

    /// A cluster's masters, none known yet: [`learn`](Self::learn) them.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster() -> Owners {
        Owners { node_of: (0..super::idle::SLOTS).map(|_| AtomicU32::new(UNKNOWN)).collect(), names: Mutex::default() }
    }

    /// The index of the node serving `key`, or `None` while its slot's is unknown.
    pub(crate) fn owner(&self, key: &[u8]) -> Option<usize> {
        if self.node_of.is_empty() {
            return Some(0);
        }
        #[cfg(feature = "cluster")]
        {
            let node = self.node_of.get(usize::from(super::idle::slot(key)))?.load(Ordering::Relaxed);
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

    /// Learns which master serves each slot from a `CLUSTER SLOTS` reply
    /// of a node at `host`; whether it named any. Slots it leaves out keep
    /// the master they had.
    #[cfg(feature = "cluster")]
    pub(crate) fn learn(&self, reply: &redis::Value, host: &str) -> bool {
        let redis::Value::Array(ranges) = reply else { return false };
        let mut named = false;
        for (first, last, node) in ranges.iter().filter_map(|range| parse_range(range, host)) {
            let Some(index) = self.index_of(&node) else { continue };
            for slot in first..=last.min(super::idle::SLOTS - 1) {
                self.node_of[slot].store(index as u32, Ordering::Relaxed);
            }
            named = true;
        }
        named
    }

    /// Learns that `node` serves `slot` (a `MOVED` said so); its index.
    #[cfg(feature = "cluster")]
    pub(crate) fn moved(&self, slot: u16, node: &str) -> Option<usize> {
        let index = self.index_of(node)?;
        self.node_of.get(usize::from(slot))?.store(index as u32, Ordering::Relaxed);
        Some(index)
    }

    /// The index of the node named `node`, named now if it is new; `None`
    /// past [`MAX_NODES`].
    #[cfg(feature = "cluster")]
    pub(crate) fn index_of(&self, node: &str) -> Option<usize> {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = names.iter().position(|known| known == node) {
            return Some(index);
        }
        if names.len() >= MAX_NODES {
            return None;
        }
        names.push(node.to_owned());
        Some(names.len() - 1)
    }

    /// How many nodes are named so far: indexes `0..known()`.
    #[cfg(feature = "cluster")]
    pub(crate) fn known(&self) -> usize {
        self.names.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// The nodes serving at least one slot, each once, by index.
    #[cfg(feature = "cluster")]
    pub(crate) fn masters(&self) -> Vec<usize> {
        let mut masters: Vec<usize> = Vec::new();
        for node in self.node_of.iter().map(|n| n.load(Ordering::Relaxed)).filter(|&n| n != UNKNOWN) {
            if !masters.contains(&(node as usize)) {
                masters.push(node as usize);
            }
        }
        masters
    }
}

/// One entry of `CLUSTER SLOTS`: `[first, last, [ip, port, ..], replicas..]`,
/// its master named by address (what an operator recognises in a log). A
/// node that has not learnt its own address (alone in its cluster) names
/// itself by none: it is then the node at `host` that answered.
#[cfg(feature = "cluster")]
fn parse_range(range: &redis::Value, host: &str) -> Option<(usize, usize, String)> {
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
    let ip = text(master.first()).filter(|ip| !ip.is_empty() && ip != "?").unwrap_or_else(|| host.to_owned());
    let node = format!("{ip}:{}", text(master.get(1))?);
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
        assert!(owners.learn(&Value::Array(vec![range(0, 8191, 7000), range(8192, 16383, 7001)]), "10.0.0.9"));
        // `foo` is in slot 12182, `123456789` in 12739 and `a` in 15495: all the second master's.
        assert_eq!(owners.owner(b"foo"), Some(1));
        assert_eq!(owners.owner(b"{user1000}.x"), owners.owner(b"user1000"));
        assert_eq!(owners.name(1), "10.0.0.1:7001");
        // A failover: the same slots, another master, another node.
        assert!(owners.learn(&Value::Array(vec![range(8192, 16383, 7004)]), "10.0.0.9"));
        assert_eq!((owners.owner(b"foo"), owners.name(2).as_str()), (Some(2), "10.0.0.1:7004"));
        assert_eq!(owners.masters(), vec![0, 2]);
        // A MOVED: one slot, to a node named for the first time.
        assert_eq!(owners.moved(12_182, "10.0.0.1:7009"), Some(3));
        assert_eq!((owners.owner(b"foo"), owners.owner(b"a")), (Some(3), Some(2)));
        assert!(!owners.learn(&Value::Array(vec![Value::Int(1)]), "10.0.0.9"), "a malformed reply names nothing");
        // A lone node names itself by no address: the one asked.
        let unnamed =
            Value::Array(vec![Value::Int(0), Value::Int(16383), Value::Array(vec![bulk(""), Value::Int(7005)])]);
        assert!(owners.learn(&Value::Array(vec![unnamed]), "10.0.0.9"));
        assert_eq!(owners.name(owners.owner(b"foo").unwrap()), "10.0.0.9:7005");
        assert_eq!(Owners::one("x".to_owned()).owner(b"anything"), Some(0));
    }
}
