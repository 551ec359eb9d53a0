//! The scripts: one made per bound policy from the files in `lua/`, and the
//! registry of those a backend has bound, to load them again after Redis
//! loses them.
//!
//! A script is one line of the policy's constants, `lua/prelude.lua` (KEYS,
//! ARGV), then its algorithm's fragments. Writing the constants in keeps a
//! call's ARGV to the call itself, the same for every script.

use super::connection::Connection;
use super::counter::Counter;
use super::reply::Reply;
use crate::policy::{Params, Policy, Strategy};
use redis::{RedisResult, Script};
use redlimit_grammar::AlgorithmKind;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

const HEAD: &str = include_str!("../../../lua/head.lua");
const PRELUDE: &str = include_str!("../../../lua/prelude.lua");
const CLOCK: &str = include_str!("../../../lua/clock.lua");
const WINDOW: &str = include_str!("../../../lua/window.lua");
const SUB_WINDOWS: &str = include_str!("../../../lua/sub_windows.lua");
const FIXED_WINDOW: &str = include_str!("../../../lua/fixed_window.lua");
const FIXED_WINDOW_COUNTER: &str = include_str!("../../../lua/fixed_window_counter.lua");
const SLIDING_WINDOW: &str = include_str!("../../../lua/sliding_window.lua");
const SLIDING_WINDOW_TOTALS: &str = include_str!("../../../lua/sliding_window_totals.lua");
const SLIDING_LOG: &str = include_str!("../../../lua/sliding_log.lua");
const TOKEN_BUCKET: &str = include_str!("../../../lua/token_bucket.lua");
const LEAKY_BUCKET: &str = include_str!("../../../lua/leaky_bucket.lua");
const GCRA: &str = include_str!("../../../lua/gcra.lua");
const BUCKET_STATE: &str = include_str!("../../../lua/bucket_state.lua");
const SET_STATE: &str = include_str!("../../../lua/set_state.lua");
const BATCH: &str = include_str!("../../../lua/batch.lua");

/// The first line that lets a script on Redis 7 or later touch keys of
/// several slots of one cluster node: a cluster batch's keys share a node,
/// not always a slot. A cluster whose masters take it runs every script
/// with it (and `cross_slot` set, so a batch checks its keys first).
pub(crate) const CROSS_SLOT: &str = "#!lua flags=allow-cross-slot-keys\n";

/// From this many sub-windows in the widest window on, a sliding window is
/// decided by the totals layout, whose cost does not grow with them; below,
/// the hash layout reads fewer fields. BENCHMARKS.md has the measurements.
pub(crate) const TOTALS_FROM_SUB_WINDOWS: u64 = 16;

/// The script that decides a policy on Redis, and how to read its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Made {
    pub(crate) source: String,
    pub(crate) reply: Reply,
}

/// The script for `policy`; `server_clock`: decided on Redis's own clock,
/// where a fixed window of one strategy is a counter ([`Counter`]);
/// `cross_slot`: for a cluster's node, a batch reaching keys of its other
/// slots ([`CROSS_SLOT`]).
pub(crate) fn make(policy: &Policy, server_clock: bool, cross_slot: bool) -> Made {
    let join = |constants: String, fragments: &[&str]| join(constants, fragments, cross_slot);
    if let Some(counter) = Counter::of(policy).filter(|_| server_clock) {
        return Made { source: join(counter.constants(), &[FIXED_WINDOW_COUNTER]), reply: Reply::Counter(counter) };
    }
    let (n, p) = policy.reduced_rate;
    let window = |strategies: &[Strategy], constants: String, fragments: &[&str]| Made {
        source: join(constants, &[&[CLOCK, WINDOW][..], fragments].concat()),
        reply: Reply::Window { quotas: if strategies.len() > 1 { strategies.len() } else { 0 } },
    };
    let bucket = |kind: AlgorithmKind, first: u64, fragments: &[&str]| {
        let name = if kind == AlgorithmKind::Gcra { "burst" } else { "capacity" };
        Made {
            source: join(format!("local {name}, n, p = {first}, {n}, {p}"), &[&[CLOCK][..], fragments].concat()),
            reply: Reply::Bucket { kind, constants: [first, n, p] },
        }
    };
    match &policy.params {
        Params::FixedWindow { strategies } => {
            window(strategies, format!("local limits, windows = {}", tables(strategies)), &[FIXED_WINDOW])
        }
        Params::SlidingWindow { strategies, precision_us } => {
            let widest = strategies.iter().map(|s| s.window_us / precision_us).max().unwrap_or(0);
            let layout = if widest >= TOTALS_FROM_SUB_WINDOWS { SLIDING_WINDOW_TOTALS } else { SLIDING_WINDOW };
            window(strategies, sliding_window_constants(*precision_us, strategies), &[SUB_WINDOWS, layout])
        }
        Params::SlidingLog { strategies } => {
            window(strategies, format!("local limits, windows = {}", tables(strategies)), &[SLIDING_LOG])
        }
        Params::TokenBucket { capacity, .. } => {
            bucket(AlgorithmKind::TokenBucket, *capacity, &[TOKEN_BUCKET, BUCKET_STATE, SET_STATE])
        }
        Params::LeakyBucket { capacity, .. } => {
            bucket(AlgorithmKind::LeakyBucket, *capacity, &[LEAKY_BUCKET, BUCKET_STATE, SET_STATE])
        }
        Params::Gcra { burst, .. } => bucket(AlgorithmKind::Gcra, *burst, &[GCRA, SET_STATE]),
    }
}

/// `{<limit>, ...}, {<window µs>, ...}`: the strategies as two Lua tables.
fn tables(strategies: &[Strategy]) -> String {
    let list = |f: fn(&Strategy) -> u64| strategies.iter().map(|s| f(s).to_string()).collect::<Vec<_>>().join(", ");
    format!("{{{}}}, {{{}}}", list(|s| s.limit), list(|s| s.window_us))
}

/// A sliding window's constants line.
fn sliding_window_constants(precision_us: u64, strategies: &[Strategy]) -> String {
    format!("local precision, limits, windows = {precision_us}, {}", tables(strategies))
}

/// The constants line and whether the script is flagged [`CROSS_SLOT`]
/// (then opened by it), head.lua, then the prelude and `fragments` as the
/// function `decide(key, o)`, then batch.lua, which calls it once per call.
fn join(constants: String, fragments: &[&str], cross_slot: bool) -> String {
    let mut source = String::new();
    if cross_slot {
        source.push_str(CROSS_SLOT);
    }
    source.push_str(&constants);
    source.push_str(&format!("\nlocal cross_slot = {cross_slot}\n"));
    source.push_str(HEAD);
    source.push_str("local function decide(key, o)\n");
    source.push_str(PRELUDE);
    for fragment in fragments {
        source.push_str(fragment);
    }
    source.push_str("end\n");
    source.push_str(BATCH);
    source
}

/// The source of the script that decides `policy` on Redis, e.g. to run it
/// by hand with `EVAL`: the policy's constants written in, so it takes only
/// the call's ARGV (`lua/prelude.lua`). `server_clock`: decided on Redis's
/// own clock (no time sent), where a fixed window of one strategy is a
/// counter (see [`fixed_window_counter_source`]).
///
/// ```
/// use redlimit::__private::script_source;
/// use redlimit::Policy;
///
/// let source = script_source(&Policy::token_bucket(10, "2/6s").unwrap(), true);
/// assert!(source.starts_with("local capacity, n, p = 10, 1, 3000000\n"));
/// assert!(source.contains("return struct.pack('<dd', reply, now)\n"));
/// assert!(source.ends_with("return replies\n"), "every script decides one call or a batch");
/// let log = script_source(&Policy::sliding_log("10/1s,100/1m").unwrap(), false);
/// assert!(log.starts_with("local limits, windows = {10, 100}, {1000000, 60000000}\n"));
/// ```
pub fn script_source(policy: &Policy, server_clock: bool) -> String {
    make(policy, server_clock, false).source
}

/// The source of a sliding window script in the layout asked for (the
/// totals layout, or the hash layout), whichever the runtime would pick:
/// `strategies` as (limit, window in µs), on sub-windows of `precision_us`.
/// For the tests and the bench that compare the two layouts.
///
/// ```
/// use redlimit::__private::sliding_window_source;
///
/// let totals = sliding_window_source(100_000, &[(5, 1_000_000)], true);
/// assert!(totals.starts_with("local precision, limits, windows = 100000, {5}, {1000000}\n"));
/// assert_ne!(totals, sliding_window_source(100_000, &[(5, 1_000_000)], false));
/// ```
pub fn sliding_window_source(precision_us: u64, strategies: &[(u64, u64)], totals: bool) -> String {
    let strategies: Vec<Strategy> =
        strategies.iter().map(|&(limit, window_us)| Strategy { limit, window_us }).collect();
    let layout = if totals { SLIDING_WINDOW_TOTALS } else { SLIDING_WINDOW };
    join(sliding_window_constants(precision_us, &strategies), &[CLOCK, WINDOW, SUB_WINDOWS, layout], false)
}

/// The source of the script that decides `policy` on a Redis Cluster
/// whose masters take scripts across the slots of one node (Redis 7 and
/// later): [`script_source`]'s, flagged `allow-cross-slot-keys`, its
/// batches checking first that every key is on the node.
///
/// ```
/// use redlimit::__private::cross_slot_script_source;
/// use redlimit::Policy;
///
/// let source = cross_slot_script_source(&Policy::gcra("1/1s", 2).unwrap(), true);
/// assert!(source.starts_with("#!lua flags=allow-cross-slot-keys\nlocal burst, n, p = 2, 1, 1000000\n"));
/// assert!(source.contains("local cross_slot = true\n"));
/// ```
#[cfg(feature = "cluster")]
pub fn cross_slot_script_source(policy: &Policy, server_clock: bool) -> String {
    make(policy, server_clock, true).source
}

/// The source of the script that decides `policy` on Redis's own clock when
/// it is a fixed window of one strategy: a counter whose TTL is the window,
/// with the policy's limit and window written in (see
/// [`Policy::fixed_window`](crate::Policy::fixed_window) for when it is
/// used). `None` for any other policy.
///
/// ```
/// use redlimit::__private::fixed_window_counter_source;
/// use redlimit::Policy;
///
/// let source = fixed_window_counter_source(&Policy::fixed_window("10/1s").unwrap()).unwrap();
/// assert!(source.starts_with("local limit, window, window_text = 10, 1000, '1000'"));
/// assert!(source.contains("INCR") && source.contains("PEXPIRE"));
/// assert!(fixed_window_counter_source(&Policy::fixed_window("10/1s,100/1m").unwrap()).is_none());
/// ```
pub fn fixed_window_counter_source(policy: &Policy) -> Option<String> {
    Counter::of(policy).map(|_| script_source(policy, true))
}

/// The scripts bound on one backend. Redis forgets scripts (a restart, a
/// failover, resharding to a new node, `SCRIPT FLUSH`): the calls that meet
/// `NOSCRIPT` then wait for one reload of every script here and try again,
/// instead of each sending its own `SCRIPT LOAD`.
#[derive(Default)]
pub(crate) struct Registry {
    /// By SHA-1: policies that make the same source share one script.
    scripts: Mutex<HashMap<String, Arc<Script>>>,
    /// Reloads finished: a call that sent its `EVALSHA` before the latest
    /// one started does not reload again.
    reloads: AtomicU64,
    reloading: tokio::sync::Mutex<()>,
}

impl Registry {
    /// The script of `source`, registered to be reloaded with the others.
    pub(crate) fn register(&self, source: &str) -> Arc<Script> {
        let script = Script::new(source);
        let mut scripts = self.scripts.lock().unwrap_or_else(PoisonError::into_inner);
        scripts.entry(script.get_hash().to_owned()).or_insert_with(|| Arc::new(script)).clone()
    }

    /// Reloads finished so far; read before sending an `EVALSHA`.
    pub(crate) fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Acquire)
    }

    /// Loads every script again, unless another call did since `reloads_before`.
    pub(crate) async fn reload(&self, connection: &mut Connection, reloads_before: u64) -> RedisResult<()> {
        let _running = self.reloading.lock().await;
        if self.reloads() != reloads_before {
            return Ok(());
        }
        tracing::info!(target: "redlimit", "Redis lost the rate limit scripts (restart, failover or SCRIPT FLUSH); loading them again");
        let scripts: Vec<Arc<Script>> =
            self.scripts.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect();
        for script in scripts {
            script.prepare_invoke().load_async(connection).await?;
        }
        self.reloads.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_has_its_reply_and_its_constants_written_in() {
        let gcra = make(&Policy::gcra("1000/1s", 999).unwrap(), true, false);
        assert!(gcra.source.starts_with("local burst, n, p = 999, 1, 1000\n"));
        assert_eq!(gcra.reply, Reply::Bucket { kind: AlgorithmKind::Gcra, constants: [999, 1, 1000] });
        let leaky = make(&Policy::leaky_bucket(5, "7/3s").unwrap(), false, false);
        assert_eq!(leaky.reply, Reply::Bucket { kind: AlgorithmKind::LeakyBucket, constants: [5, 7, 3_000_000] });

        let one = Policy::fixed_window("10/1s").unwrap();
        assert_eq!(make(&one, true, false).reply, Reply::Counter(Counter { limit: 10, window_ms: 1000 }));
        assert_eq!(make(&one, false, false).reply, Reply::Window { quotas: 0 }, "a client clock: the hash layout");
        let two = make(&Policy::fixed_window("10/1s,100/1m").unwrap(), true, false);
        assert!(two.source.starts_with("local limits, windows = {10, 100}, {1000000, 60000000}\n"));
        assert_eq!(two.reply, Reply::Window { quotas: 2 });
    }

    #[test]
    fn many_sub_windows_take_the_totals_layout() {
        let layout = |s: &str| make(&Policy::sliding_window(s, "100ms").unwrap(), true, false).source;
        assert!(layout("12/1600ms").contains(SLIDING_WINDOW_TOTALS));
        assert!(!layout("12/1500ms").contains(SLIDING_WINDOW_TOTALS));
        assert!(layout("12/1500ms").starts_with("local precision, limits, windows = 100000, {12}, {1500000}\n"));
    }

    #[test]
    fn the_sliding_log_holds_as_many_entries_as_its_twin() {
        let bound = format!("local max_entries = {}\n", crate::algo::SLIDING_LOG_MAX_ENTRIES);
        assert!(SLIDING_LOG.contains(&bound));
    }

    #[test]
    fn only_the_counter_decides_without_clock_lua() {
        for policy in [Policy::fixed_window("10/1s,100/1m").unwrap(), Policy::gcra("1/1s", 0).unwrap()] {
            assert!(make(&policy, true, false).source.contains(CLOCK));
        }
        let counter = make(&Policy::fixed_window("10/1s").unwrap(), true, false).source;
        assert!(counter.contains(PRELUDE) && !counter.contains(CLOCK));
    }

    #[test]
    fn only_a_cross_slot_script_is_flagged_and_says_so() {
        let policy = Policy::gcra("1/1s", 2).unwrap();
        let (plain, flagged) = (make(&policy, true, false).source, make(&policy, true, true).source);
        assert!(plain.starts_with("local burst") && plain.contains("\nlocal cross_slot = false\n"));
        assert!(flagged.starts_with(CROSS_SLOT) && flagged.contains("\nlocal cross_slot = true\n"));
        assert!(HEAD.contains("local function redis_time()"));
    }

    #[test]
    fn a_source_is_registered_once() {
        let registry = Registry::default();
        let source = script_source(&Policy::gcra("7/3s", 2).unwrap(), true);
        let (first, again) = (registry.register(&source), registry.register(&source));
        assert!(Arc::ptr_eq(&first, &again));
        registry.register(&script_source(&Policy::gcra("7/3s", 3).unwrap(), true));
        assert_eq!(registry.scripts.lock().unwrap().len(), 2);
    }
}
