//! [`Breaker`]: after a failure to reach a node, fail fast on that node's
//! keys for a while. Per node, so a cluster master that is down or hung
//! fails its own slots' calls, never those of the masters that answer; a
//! single server or a Sentinel master is the case of one node.

use super::owners::{Owners, MAX_NODES};
use super::Connection;
use crate::error::{Error, Failure};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A node that has not failed for this long is named again when it next
/// fails: one line per outage, not one per reopening. At INFO: each
/// limiter's outage log is the WARN; this line says which node it was.
const QUIET: Duration = Duration::from_secs(10);

/// Remembers a failure to reach a node for a short interval, shared by every
/// clone of a backend, so callers of that node's keys fail at once instead
/// of each waiting out a timeout; after the interval the next call tries
/// the node again.
pub(crate) struct Breaker {
    origin: Instant,
    owners: Arc<Owners>,
    /// Learns the slots' owners again after a node fails.
    connection: Connection,
    /// One per node that `owners` names, by its index.
    nodes: Box<[NodeBreaker]>,
}

#[derive(Debug, Default)]
struct NodeBreaker {
    /// Microseconds since `origin` until which calls fail fast; 0 when closed.
    open_until_us: AtomicU64,
    /// When it last opened (µs since `origin`, at least 1), 0 never.
    opened_us: AtomicU64,
    /// What calls fail with while it is open.
    failure: Mutex<Option<Error>>,
}

impl Breaker {
    /// The breakers of `connection`'s nodes.
    pub(crate) fn new(connection: &Connection) -> Self {
        let owners = connection.owners.clone();
        let count = if connection.is_cluster() { MAX_NODES } else { 1 };
        Breaker {
            origin: Instant::now(),
            owners,
            connection: connection.clone(),
            nodes: (0..count).map(|_| NodeBreaker::default()).collect(),
        }
    }

    fn elapsed_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn node(&self, key: &[u8]) -> Option<(usize, &NodeBreaker)> {
        let index = self.owners.owner(key)?;
        Some((index, self.nodes.get(index)?))
    }

    /// The error a call on `key` fails with while its node's breaker is
    /// open: an [`Error::Unavailable`] naming the failure that opened it.
    pub(crate) fn open(&self, key: &[u8]) -> Option<Error> {
        let (_, node) = self.node(key)?;
        let until = node.open_until_us.load(Ordering::Acquire);
        // Closed since it last expired: no clock to read (most calls).
        if until == 0 {
            return None;
        }
        if self.elapsed_us() < until {
            node.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
        } else {
            // Expired: closed again, unless another failure has just reopened it.
            let _ = node.open_until_us.compare_exchange(until, 0, Ordering::AcqRel, Ordering::Relaxed);
            None
        }
    }

    /// Opens the breaker of `key`'s node for `interval` because of `error`,
    /// and learns the slots' owners again: the node may have been failed
    /// over. A key of a slot whose owner is not known yet opens nothing.
    pub(crate) fn trip(&self, key: &[u8], error: &Error, interval: Duration) {
        self.connection.relearn_slots();
        let Some((index, node)) = self.node(key) else {
            tracing::debug!(target: "redlimit", "a Redis node failed before the cluster's slots were learnt: {error}");
            return;
        };
        let name = self.owners.name(index);
        // Made once here, so each fast failure is a clone, not a new message.
        // Worded as for one server, which callers already match; the log names the node.
        let message = format!("{error} (Redis is not asked again for {interval:?})");
        let failing_fast = Error::Unavailable(Failure::caused_by(message, error.clone()));
        *node.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(failing_fast);
        let now = self.elapsed_us();
        // At least 1: 0 means closed. Saturating, so no interval wraps round
        // to one already past (`RedisOptions` bounds it to an hour anyway).
        let interval_us = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        node.open_until_us.store(now.saturating_add(interval_us).max(1), Ordering::Release);
        let before = node.opened_us.swap(now.max(1), Ordering::AcqRel);
        let quiet_us = u64::try_from(QUIET.as_micros()).unwrap_or(u64::MAX);
        if before == 0 || now.saturating_sub(before) >= quiet_us {
            tracing::info!(
                target: "redlimit",
                node = %name,
                "Redis at {name} failed ({error}); calls on its keys fail fast until it answers again, \
                 calls on other nodes' keys go on"
            );
        }
    }
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker").finish_non_exhaustive()
    }
}
