//! [`Grouping`]: which of a limiter's waiting calls may share a script call.
//! A single server (or a Sentinel's master) runs any keys in one script. A
//! cluster node runs keys of several of its slots in one script only when
//! the script is flagged `allow-cross-slot-keys` (Redis 7 and later), else
//! keys of one slot only; so on a cluster, calls are grouped by the node
//! that serves their slot ([`SlotMap`]), or by slot.

#[cfg(feature = "cluster")]
pub(crate) use self::cluster::{cross_slot_scripts, SlotMap};
#[cfg(feature = "cluster")]
use crate::backend::redis::connection::idle::slot;
use crate::backend::redis::connection::Connection;
#[cfg(feature = "cluster")]
use std::sync::Arc;

/// How a limiter's calls are grouped into batches.
pub(crate) enum Grouping {
    /// All together: one server.
    Together,
    /// A cluster whose scripts may not cross slots: by slot.
    #[cfg(feature = "cluster")]
    BySlot,
    /// A cluster whose scripts may: by the node serving the slot, as last learnt.
    #[cfg(feature = "cluster")]
    ByNode(Arc<SlotMap>),
}

impl Grouping {
    /// The group of a storage key: calls of one group may go in one script call.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) fn group(&self, key: &[u8]) -> u32 {
        match self {
            Grouping::Together => 0,
            #[cfg(feature = "cluster")]
            Grouping::BySlot => u32::from(slot(key)),
            #[cfg(feature = "cluster")]
            Grouping::ByNode(map) => map.group(slot(key)),
        }
    }

    /// Batches reach keys of several slots: the scripts are flagged so.
    pub(crate) fn crosses_slots(&self) -> bool {
        #[cfg(feature = "cluster")]
        return matches!(self, Grouping::ByNode(_));
        #[cfg(not(feature = "cluster"))]
        false
    }

    /// A batch declares every key it touches, as servers that lock or check
    /// declared keys need: wherever a script's declared keys may be all of a
    /// batch's (one server, Sentinel, a cluster's one slot); a batch across
    /// a node's slots declares only its first.
    pub(crate) fn declares_every_key(&self) -> bool {
        !self.crosses_slots()
    }

    /// A batch was refused because its keys are not all on the node it
    /// reached: the slots moved, so the map is learnt again (in the background).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) fn misrouted(&self, connection: &Connection) {
        match self {
            Grouping::Together => {}
            #[cfg(feature = "cluster")]
            Grouping::BySlot => {}
            #[cfg(feature = "cluster")]
            Grouping::ByNode(map) => map.refresh_later(connection),
        }
    }
}

#[cfg(feature = "cluster")]
mod cluster {
    use crate::backend::redis::connection::idle::SLOTS;
    use crate::backend::redis::connection::Connection;
    use crate::backend::redis::scripts::fragments::CROSS_SLOT;
    use redis::{RedisResult, Value};
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};

    /// A slot no node was known to serve: grouped alone, by its number.
    const UNKNOWN: u32 = u32::MAX;

    /// Which node serves each slot, as `CLUSTER SLOTS` said when last asked.
    /// A stale entry costs nothing wrong: a batch whose keys turn out to be
    /// on two nodes is refused unrun, and its calls are sent one by one.
    pub(crate) struct SlotMap {
        /// Per slot, the index of its node in `nodes`, or [`UNKNOWN`].
        node_of: Box<[AtomicU32]>,
        /// Node ids (or addresses) seen so far; an index never changes meaning.
        nodes: Mutex<Vec<String>>,
        refreshing: AtomicBool,
    }

    impl SlotMap {
        /// Asks the cluster which node serves each slot.
        pub(crate) async fn fetch(connection: &Connection) -> RedisResult<Arc<SlotMap>> {
            let map = SlotMap {
                node_of: (0..SLOTS).map(|_| AtomicU32::new(UNKNOWN)).collect(),
                nodes: Mutex::default(),
                refreshing: AtomicBool::new(false),
            };
            map.refresh(connection).await?;
            Ok(Arc::new(map))
        }

        /// `slot`'s group: its node's index, or, for a slot of no known node,
        /// the slot itself above every index.
        pub(crate) fn group(&self, slot: u16) -> u32 {
            match self.node_of[usize::from(slot)].load(Ordering::Relaxed) {
                UNKNOWN => (1 << 16) + u32::from(slot),
                node => node,
            }
        }

        /// Learns the map again in a task of its own, unless one already is.
        pub(crate) fn refresh_later(self: &Arc<SlotMap>, connection: &Connection) {
            if self.refreshing.swap(true, Ordering::AcqRel) {
                return;
            }
            let (map, connection) = (self.clone(), connection.clone());
            let refresh = async move {
                if let Err(e) = map.refresh(&connection).await {
                    tracing::debug!(target: "redlimit", "could not learn the Redis Cluster's slots again: {e}");
                }
                map.refreshing.store(false, Ordering::Release);
            };
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(refresh)),
                Err(_) => self.refreshing.store(false, Ordering::Release),
            }
        }

        async fn refresh(&self, connection: &Connection) -> RedisResult<()> {
            let mut connection = connection.clone();
            let reply: Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut connection).await?;
            let Value::Array(ranges) = reply else { return Ok(()) };
            for range in ranges {
                let Some((first, last, node)) = parse_range(&range) else { continue };
                let index = self.index_of(node);
                for slot in first..=last.min(SLOTS - 1) {
                    self.node_of[slot].store(index, Ordering::Relaxed);
                }
            }
            Ok(())
        }

        fn index_of(&self, node: String) -> u32 {
            let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
            match nodes.iter().position(|known| *known == node) {
                Some(index) => index as u32,
                None => {
                    nodes.push(node);
                    (nodes.len() - 1) as u32
                }
            }
        }
    }

    /// One entry of `CLUSTER SLOTS`: `[first, last, [ip, port, id, ..], replicas..]`;
    /// the master's id names the node (its address when there is none).
    fn parse_range(range: &Value) -> Option<(usize, usize, String)> {
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
        let node =
            text(master.get(2)).or_else(|| Some(format!("{}:{}", text(master.first())?, text(master.get(1))?)))?;
        Some((usize::try_from(*first).ok()?, usize::try_from(*last).ok()?, node))
    }

    /// Whether the cluster's masters take scripts that touch several slots
    /// of one node (the `allow-cross-slot-keys` flag, Redis 7 and later).
    pub(crate) async fn cross_slot_scripts(connection: &Connection) -> bool {
        let mut connection = connection.clone();
        let probe = format!("{CROSS_SLOT}return 1");
        redis::cmd("SCRIPT").arg("LOAD").arg(probe).query_async::<Value>(&mut connection).await.is_ok()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_range_names_its_master_by_id_or_address() {
            let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
            let with_id = Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                Value::Array(vec![bulk("127.0.0.1"), Value::Int(7000), bulk("abc")]),
            ]);
            assert_eq!(parse_range(&with_id), Some((0, 5460, "abc".to_owned())));
            let without = Value::Array(vec![
                Value::Int(1),
                Value::Int(2),
                Value::Array(vec![bulk("10.0.0.1"), Value::Int(7001)]),
            ]);
            assert_eq!(parse_range(&without), Some((1, 2, "10.0.0.1:7001".to_owned())));
            assert_eq!(parse_range(&Value::Int(3)), None);
        }
    }
}
