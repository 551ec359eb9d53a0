//! [`Grouping`]: which of a limiter's waiting calls may share a script call.
//! A single server (or a Sentinel's master) runs any keys in one script. A
//! cluster node runs keys of several of its slots in one script only when
//! the script is flagged `allow-cross-slot-keys` (Redis 7 and later), else
//! keys of one slot only; so on a cluster, calls are grouped by the node
//! that serves their slot (the connection's [`Owners`], which the breakers
//! share), or by slot.

#[cfg(feature = "cluster")]
use crate::backend::redis::connection::idle::slot;
#[cfg(feature = "cluster")]
use crate::backend::redis::connection::owners::Owners;
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
    /// A cluster whose scripts may: by the node serving the slot, as last
    /// learnt. A stale owner costs nothing wrong: a batch whose keys turn out
    /// to be on two nodes is refused unrun, and its calls are sent one by one.
    #[cfg(feature = "cluster")]
    ByNode(Arc<Owners>),
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
            // A slot of no known node is grouped alone, by its number above every node's.
            Grouping::ByNode(owners) => owners.owner(key).map_or((1 << 16) + u32::from(slot(key)), |node| node as u32),
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
            Grouping::ByNode(_) => connection.relearn_slots(),
        }
    }
}

/// Whether the cluster's masters take scripts that touch several slots of
/// one node (the `allow-cross-slot-keys` flag, Redis 7 and later).
#[cfg(feature = "cluster")]
pub(crate) async fn cross_slot_scripts(connection: &Connection) -> bool {
    let mut connection = connection.clone();
    let probe = format!("{}return 1", crate::backend::redis::scripts::fragments::CROSS_SLOT);
    redis::cmd("SCRIPT").arg("LOAD").arg(probe).query_async::<redis::Value>(&mut connection).await.is_ok()
}
