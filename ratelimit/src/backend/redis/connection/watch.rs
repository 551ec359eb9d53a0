//! [`DataWatch`]: whether the server's data may be gone since this process
//! last looked, so the deny cache forgets denials the server no longer holds.
//!
//! Two signs, read together in one round trip (`check`): the server's
//! `run_id` (`INFO server`), which a restart changes, and a marker key of
//! this process's own, which a flush (`FLUSHALL`, `FLUSHDB`) removes. Either
//! bumps the epoch; a denial remembered under an older epoch is not served.
//! Nothing is asked for it alone: a check goes before the first request
//! after a connection error (the reconnect) and otherwise before at most one
//! request per [`CHECK_EVERY`]. A single server and a Sentinel's master are
//! watched; a cluster's nodes are not.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// At most one check per this long while requests flow: how long a flush
/// can go unnoticed by a process whose calls reach the server.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The marker outlives any pause between checks a live process makes; an
/// idle process's marker expires, and its next check counts it a flush,
/// which only makes the deny cache ask the server again.
const MARKER_TTL_MS: u64 = 24 * 3_600_000;

pub(crate) struct DataWatch {
    /// Watched at all: not on a cluster.
    enabled: bool,
    /// Bumped each time the server's data may have gone.
    epoch: AtomicU64,
    /// When the next check is due, µs on this process's monotonic clock.
    next_check_us: AtomicU64,
    /// A connection failed: check before the next request.
    wanted: AtomicBool,
    /// One check at a time; other requests go on meanwhile.
    checking: AtomicBool,
    /// The server's `run_id` at the last check, and whether one was made.
    seen: Mutex<Seen>,
    marker: String,
}

#[derive(Default)]
struct Seen {
    run_id: Option<String>,
    checked: bool,
}

fn now_us() -> u64 {
    crate::clock::process_ns() / 1000
}

impl DataWatch {
    pub(crate) fn new(enabled: bool) -> DataWatch {
        use std::hash::BuildHasher;
        let random = std::collections::hash_map::RandomState::new().hash_one((std::process::id(), now_us()));
        DataWatch {
            enabled,
            epoch: AtomicU64::new(0),
            next_check_us: AtomicU64::new(0),
            wanted: AtomicBool::new(true),
            checking: AtomicBool::new(false),
            seen: Mutex::new(Seen::default()),
            marker: format!("redlimit:data-watch:{random:016x}"),
        }
    }

    /// The epoch of the server's data as this process last saw it.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// A connection failed: the server may have restarted.
    pub(crate) fn suspect(&self) {
        if self.enabled {
            self.wanted.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a check is due before the next request, claimed by the caller when it is.
    pub(crate) fn claim(&self) -> bool {
        if !self.enabled {
            return false;
        }
        let due = self.wanted.load(Ordering::Relaxed) || now_us() >= self.next_check_us.load(Ordering::Relaxed);
        due && !self.checking.swap(true, Ordering::Acquire)
    }

    /// Checks (after [`claim`](Self::claim)) whether the server restarted or
    /// was flushed since the last check, and bumps the epoch if so. A check
    /// that gets no answer is made again before the next request.
    pub(crate) async fn check(&self, manager: &mut ConnectionManager) {
        let mut pipe = redis::pipe();
        pipe.cmd("INFO").arg("server");
        pipe.cmd("SET").arg(&self.marker).arg(1).arg("NX").arg("PX").arg(MARKER_TTL_MS);
        pipe.cmd("PEXPIRE").arg(&self.marker).arg(MARKER_TTL_MS);
        let replies = manager.req_packed_commands(&pipe, 0, 3).await;
        match replies {
            Ok(replies) if replies.len() == 3 => {
                self.wanted.store(false, Ordering::Relaxed);
                self.next_check_us.store(now_us() + CHECK_EVERY.as_micros() as u64, Ordering::Relaxed);
                self.saw(run_id(&replies[0]), marker_created(&replies[1]));
            }
            _ => self.wanted.store(true, Ordering::Relaxed),
        }
        self.checking.store(false, Ordering::Release);
    }

    /// What a check found: the `run_id` (`None`: not told) and whether the
    /// marker had to be made again (`None`: the server refused it).
    fn saw(&self, run_id: Option<String>, created: Option<bool>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let restarted = matches!((&seen.run_id, &run_id), (Some(before), Some(now)) if before != now);
        let flushed = seen.checked && created == Some(true);
        if restarted || flushed {
            self.epoch.fetch_add(1, Ordering::AcqRel);
            let what = if restarted { "restarted (its run_id changed)" } else { "was flushed" };
            tracing::warn!(target: "redlimit", "the Redis server {what}: its data may be gone, so the denials this process remembered are forgotten");
        }
        if run_id.is_some() {
            seen.run_id = run_id;
        }
        seen.checked = true;
    }
}

fn run_id(reply: &Value) -> Option<String> {
    let text = match reply {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?,
        Value::VerbatimString { text, .. } => text,
        _ => return None,
    };
    text.lines().find_map(|line| line.strip_prefix("run_id:")).map(|id| id.trim().to_string())
}

fn marker_created(reply: &Value) -> Option<bool> {
    match reply {
        Value::Okay => Some(true),
        Value::Nil => Some(false),
        _ => None,
    }
}
