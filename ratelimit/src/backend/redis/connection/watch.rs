//! [`DataWatch`]: whether the server's data may be gone since this process
//! last looked, so the deny cache forgets denials the server no longer holds.
//!
//! Two signs, read together in one round trip (`check`): the server's
//! `run_id` (`INFO server`), which a restart changes, and how many times
//! `FLUSHALL` and `FLUSHDB` ran (`INFO commandstats`), which a flush by any
//! client counts. Either changed bumps the epoch; a denial remembered under
//! an older epoch is not served. No key is written: the keyspace holds the
//! limiters' keys and nothing else.
//!
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
    /// What the last check read.
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    run_id: Option<String>,
    /// `FLUSHALL` and `FLUSHDB` calls since the server's statistics began.
    flushes: Option<u64>,
}

fn now_us() -> u64 {
    crate::clock::process_ns() / 1000
}

impl DataWatch {
    pub(crate) fn new(enabled: bool) -> DataWatch {
        DataWatch {
            enabled,
            epoch: AtomicU64::new(0),
            next_check_us: AtomicU64::new(0),
            wanted: AtomicBool::new(true),
            checking: AtomicBool::new(false),
            seen: Mutex::new(Seen::default()),
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
        // Two sections in two commands: before Redis 7, INFO takes one.
        let mut pipe = redis::pipe();
        pipe.cmd("INFO").arg("server");
        pipe.cmd("INFO").arg("commandstats");
        let replies = manager.req_packed_commands(&pipe, 0, 2).await;
        match replies {
            Ok(replies) if replies.len() == 2 => {
                self.wanted.store(false, Ordering::Relaxed);
                self.next_check_us.store(now_us() + CHECK_EVERY.as_micros() as u64, Ordering::Relaxed);
                let flushes = text(&replies[1]).map(flushes);
                self.saw(text(&replies[0]).and_then(run_id), flushes);
            }
            _ => self.wanted.store(true, Ordering::Relaxed),
        }
        self.checking.store(false, Ordering::Release);
    }

    /// What a check found: the `run_id` and the flushes counted (`None`:
    /// not told, as when the user may not run `INFO`).
    fn saw(&self, run_id: Option<String>, flushes: Option<u64>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let restarted = matches!((&seen.run_id, &run_id), (Some(before), Some(now)) if before != now);
        // Any change counts, a count reset by `CONFIG RESETSTAT` too: it only makes the cache ask again.
        let flushed = matches!((seen.flushes, flushes), (Some(before), Some(now)) if before != now);
        if restarted || flushed {
            self.epoch.fetch_add(1, Ordering::AcqRel);
            let what = if restarted { "restarted (its run_id changed)" } else { "was flushed" };
            tracing::warn!(target: "redlimit", "the Redis server {what}: its data may be gone, so the denials this process remembered are forgotten");
        }
        if run_id.is_some() {
            seen.run_id = run_id;
        }
        if flushes.is_some() {
            seen.flushes = flushes;
        }
    }
}

/// An `INFO` reply's text; `None` for an error (`NOPERM`).
fn text(reply: &Value) -> Option<&str> {
    match reply {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::VerbatimString { text, .. } => Some(text),
        _ => None,
    }
}

fn run_id(info: &str) -> Option<String> {
    info.lines().find_map(|line| line.strip_prefix("run_id:")).map(|id| id.trim().to_string())
}

/// `FLUSHALL` and `FLUSHDB` calls in an `INFO commandstats` reply, which
/// lists only the commands run since the statistics began.
fn flushes(info: &str) -> u64 {
    info.lines()
        .filter_map(|line| line.strip_prefix("cmdstat_flushall:").or_else(|| line.strip_prefix("cmdstat_flushdb:")))
        .filter_map(|stats| stats.strip_prefix("calls=")?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushes_are_read_from_commandstats() {
        let info =
            "# Commandstats\r\ncmdstat_ping:calls=4,usec=2\r\ncmdstat_flushall:calls=2,usec=90,usec_per_call=45.00\r\n\
                    cmdstat_flushdb:calls=1,usec=3\r\n";
        assert_eq!(flushes(info), 3);
        assert_eq!(flushes("# Commandstats\r\ncmdstat_ping:calls=4,usec=2\r\n"), 0);
        assert_eq!(run_id("# Server\r\nredis_version:7.2.4\r\nrun_id:ab12\r\n").as_deref(), Some("ab12"));
    }
}
