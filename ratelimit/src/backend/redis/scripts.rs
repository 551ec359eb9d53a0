//! The scripts: one per family of algorithm, made from the files in `lua/`,
//! and what one policy sends with each call ([`Plan`]); the registry of the
//! scripts a backend uses, to load them again after Redis loses them.
//!
//! A script is `lua/head.lua`, then the function `decider(policy)`: the
//! family's policy reader, returning the function `decide(key, cost, kind,
//! now, slack, permit)`: `lua/prelude.lua` (a call's values) and its
//! algorithm's fragments; then `lua/batch.lua` (KEYS and ARGV: one call or
//! a batch, which reads each of its policies once). The policy's numbers travel
//! with each call, so the scripts a store loads are fixed by the families
//! (and whether a cluster's scripts cross slots), never by the policies.

use super::connection::Connection;
use super::counter::Counter;
use super::reply::Reply;
use crate::policy::{Params, Policy, Strategy};
use redis::{RedisResult, Script};
use redlimit_grammar::AlgorithmKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

const HEAD: &str = include_str!("../../../lua/head.lua");
const PRELUDE: &str = include_str!("../../../lua/prelude.lua");
const POLICY_WINDOWS: &str = include_str!("../../../lua/policy_windows.lua");
const POLICY_BUCKET: &str = include_str!("../../../lua/policy_bucket.lua");
const POLICY_GCRA: &str = include_str!("../../../lua/policy_gcra.lua");
const POLICY_CONCURRENCY: &str = include_str!("../../../lua/policy_concurrency.lua");
const POLICY_COUNTER: &str = include_str!("../../../lua/policy_counter.lua");
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
const CONCURRENCY: &str = include_str!("../../../lua/concurrency.lua");
const BUCKET_READ: &str = include_str!("../../../lua/bucket_read.lua");
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

/// A script: every policy of one family is decided by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Family {
    FixedWindow,
    /// A fixed window of one strategy on Redis's clock ([`Counter`]).
    Counter,
    SlidingWindow,
    /// A sliding window of many sub-windows, kept with running totals.
    SlidingWindowTotals,
    SlidingLog,
    TokenBucket,
    LeakyBucket,
    Gcra,
    Concurrency,
}

/// How many families, so scripts.
pub(crate) const FAMILIES: usize = 9;

impl Family {
    #[cfg(test)]
    const ALL: [Family; FAMILIES] = [
        Family::FixedWindow,
        Family::Counter,
        Family::SlidingWindow,
        Family::SlidingWindowTotals,
        Family::SlidingLog,
        Family::TokenBucket,
        Family::LeakyBucket,
        Family::Gcra,
        Family::Concurrency,
    ];

    /// Its place in [`Family::ALL`]: lanes and the registry are indexed by it.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The family's script; `cross_slot`: flagged for a cluster node's
    /// slots ([`CROSS_SLOT`]).
    fn source(self, cross_slot: bool) -> String {
        let fragments: &[&str] = match self {
            Family::FixedWindow => &[POLICY_WINDOWS, CLOCK, WINDOW, FIXED_WINDOW],
            Family::Counter => &[POLICY_COUNTER, FIXED_WINDOW_COUNTER],
            Family::SlidingWindow => &[POLICY_WINDOWS, CLOCK, WINDOW, SUB_WINDOWS, SLIDING_WINDOW],
            Family::SlidingWindowTotals => &[POLICY_WINDOWS, CLOCK, WINDOW, SUB_WINDOWS, SLIDING_WINDOW_TOTALS],
            Family::SlidingLog => &[POLICY_WINDOWS, CLOCK, WINDOW, SLIDING_LOG],
            Family::TokenBucket => &[POLICY_BUCKET, CLOCK, BUCKET_READ, TOKEN_BUCKET, BUCKET_STATE, SET_STATE],
            Family::LeakyBucket => &[POLICY_BUCKET, CLOCK, BUCKET_READ, LEAKY_BUCKET, BUCKET_STATE, SET_STATE],
            Family::Gcra => &[POLICY_GCRA, CLOCK, GCRA, SET_STATE],
            Family::Concurrency => &[POLICY_CONCURRENCY, CLOCK, CONCURRENCY],
        };
        join(fragments, cross_slot)
    }
}

/// How one policy is decided on Redis: its family's script, the policy's
/// numbers as the script reads them (ARGV, `lua/prelude.lua`), and how to
/// read the reply. Made once per bound policy, by a few small writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) family: Family,
    pub(crate) policy: Vec<u8>,
    pub(crate) reply: Reply,
}

/// The plan for `policy`; `server_clock`: decided on Redis's own clock,
/// where a fixed window of one strategy is a counter ([`Counter`]).
pub(crate) fn plan(policy: &Policy, server_clock: bool) -> Plan {
    if let Some(counter) = Counter::of(policy).filter(|_| server_clock) {
        let mut numbers = number(counter.limit).to_vec();
        numbers.extend_from_slice(counter.window_ms.to_string().as_bytes());
        return Plan { family: Family::Counter, policy: numbers, reply: Reply::Counter(counter) };
    }
    let window = |family, precision_us, strategies: &[Strategy]| Plan {
        family,
        policy: windows(precision_us, strategies),
        reply: Reply::Window { quotas: if strategies.len() > 1 { strategies.len() } else { 0 } },
    };
    let (n, p) = policy.reduced_rate;
    let bucket = |family, kind, first: u64| Plan {
        family,
        policy: [first, n, p].iter().flat_map(|&v| number(v)).collect(),
        reply: Reply::Bucket { kind, constants: [first, n, p] },
    };
    match &policy.params {
        Params::FixedWindow { strategies } => window(Family::FixedWindow, 0, strategies),
        Params::SlidingWindow { strategies, precision_us } => {
            let widest = strategies.iter().map(|s| s.window_us / precision_us).max().unwrap_or(0);
            let family =
                if widest >= TOTALS_FROM_SUB_WINDOWS { Family::SlidingWindowTotals } else { Family::SlidingWindow };
            window(family, *precision_us, strategies)
        }
        Params::SlidingLog { strategies } => window(Family::SlidingLog, 0, strategies),
        Params::TokenBucket { capacity, .. } => bucket(Family::TokenBucket, AlgorithmKind::TokenBucket, *capacity),
        Params::LeakyBucket { capacity, .. } => bucket(Family::LeakyBucket, AlgorithmKind::LeakyBucket, *capacity),
        Params::Gcra { burst, .. } => bucket(Family::Gcra, AlgorithmKind::Gcra, *burst),
        Params::Concurrency { limit, lease_us } => Plan {
            family: Family::Concurrency,
            policy: [*limit, *lease_us].iter().flat_map(|&v| number(v)).collect(),
            reply: Reply::Window { quotas: 0 },
        },
    }
}

/// One number as the scripts read it: a little-endian double (every
/// policy number below 2^53 is held exactly; larger ones round as Lua's
/// own parsing of them would).
fn number(v: u64) -> [u8; 8] {
    (v as f64).to_le_bytes()
}

/// A window policy's numbers: the precision, then each strategy's limit and window.
fn windows(precision_us: u64, strategies: &[Strategy]) -> Vec<u8> {
    let mut numbers = Vec::with_capacity(8 + 16 * strategies.len());
    numbers.extend_from_slice(&number(precision_us));
    for strategy in strategies {
        numbers.extend_from_slice(&number(strategy.limit));
        numbers.extend_from_slice(&number(strategy.window_us));
    }
    numbers
}

/// The `local cross_slot = true|false` line, opened by [`CROSS_SLOT`] when
/// set; head.lua; the function `decider(policy)`: the policy reader (the
/// first of `fragments`), then the prelude and the other fragments as the
/// function `decide` it returns, so a batch reads a policy once; then
/// batch.lua, which calls `decide` once per call.
fn join(fragments: &[&str], cross_slot: bool) -> String {
    let mut source = String::new();
    if cross_slot {
        source.push_str(CROSS_SLOT);
    }
    source.push_str(&format!("local cross_slot = {cross_slot}\n"));
    source.push_str(HEAD);
    let (reader, algorithm) = fragments.split_first().expect("a family's policy reader");
    source.push_str("local function decider(policy)\n");
    source.push_str(reader);
    source.push_str("return function(key, cost, kind, now, slack, permit)\n");
    source.push_str(PRELUDE);
    for fragment in algorithm {
        source.push_str(fragment);
    }
    source.push_str("end\nend\n");
    source.push_str(BATCH);
    source
}

/// The source of the script that decides `policy` on Redis, e.g. to run it
/// by hand with `EVAL`, its ARGV starting with [`policy_argument`]'s
/// (`lua/prelude.lua`). Every policy of one family shares it.
/// `server_clock`: decided on Redis's own clock (no time sent), where a
/// fixed window of one strategy is a counter (see
/// [`fixed_window_counter_source`]).
///
/// ```
/// use redlimit::__private::script_source;
/// use redlimit::Policy;
///
/// let source = script_source(&Policy::token_bucket(10, "2/6s").unwrap(), true);
/// assert!(source.contains("local capacity, n, p = struct_unpack('<ddd', policy)\n"));
/// assert!(source.contains("return reply, now\n"), "the bucket reply, packed by batch.lua");
/// assert!(source.ends_with("return replies\n"), "every script decides one call or a batch");
/// assert_eq!(source, script_source(&Policy::token_bucket(7, "1/1h").unwrap(), true), "one script per family");
/// ```
pub fn script_source(policy: &Policy, server_clock: bool) -> String {
    plan(policy, server_clock).family.source(false)
}

/// The policy's numbers as its script reads them: the first ARGV of a call
/// (`lua/prelude.lua`).
///
/// ```
/// use redlimit::__private::policy_argument;
/// use redlimit::Policy;
///
/// let numbers = policy_argument(&Policy::gcra("2/6s", 4).unwrap(), true);
/// let read: Vec<f64> = numbers.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
/// assert_eq!(read, [4.0, 1.0, 3_000_000.0], "burst, then the rate: 1 unit per 3 000 000 µs");
/// let counter = policy_argument(&Policy::fixed_window("10/1s").unwrap(), true);
/// assert_eq!(&counter[8..], b"1000", "a counter's window, in ms, as PEXPIRE takes it");
/// ```
pub fn policy_argument(policy: &Policy, server_clock: bool) -> Vec<u8> {
    plan(policy, server_clock).policy
}

/// The source of a sliding window script in the layout asked for (the
/// totals layout, or the hash layout), whichever the runtime would pick,
/// and the ARGV of a policy of `strategies` as (limit, window in µs) on
/// sub-windows of `precision_us`. For the tests and the bench that compare
/// the two layouts.
///
/// ```
/// use redlimit::__private::sliding_window_source;
///
/// let (totals, numbers) = sliding_window_source(100_000, &[(5, 1_000_000)], true);
/// assert!(totals.contains("sliding_window_totals.lua"));
/// assert_eq!(numbers.len(), 24, "the precision, then one limit and window");
/// assert_ne!(totals, sliding_window_source(100_000, &[(5, 1_000_000)], false).0);
/// ```
pub fn sliding_window_source(precision_us: u64, strategies: &[(u64, u64)], totals: bool) -> (String, Vec<u8>) {
    let strategies: Vec<Strategy> =
        strategies.iter().map(|&(limit, window_us)| Strategy { limit, window_us }).collect();
    let family = if totals { Family::SlidingWindowTotals } else { Family::SlidingWindow };
    (family.source(false), windows(precision_us, &strategies))
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
/// assert!(source.starts_with("#!lua flags=allow-cross-slot-keys\nlocal cross_slot = true\n"));
/// ```
#[cfg(feature = "cluster")]
pub fn cross_slot_script_source(policy: &Policy, server_clock: bool) -> String {
    plan(policy, server_clock).family.source(true)
}

/// The source of the script that decides `policy` on Redis's own clock when
/// it is a fixed window of one strategy: a counter whose TTL is the window
/// (see [`Policy::fixed_window`](crate::Policy::fixed_window) for when it
/// is used). `None` for any other policy.
///
/// ```
/// use redlimit::__private::fixed_window_counter_source;
/// use redlimit::Policy;
///
/// let source = fixed_window_counter_source(&Policy::fixed_window("10/1s").unwrap()).unwrap();
/// assert!(source.contains("local window_text = string.sub(policy, 9)"));
/// assert!(source.contains("INCR") && source.contains("PEXPIRE"));
/// assert!(fixed_window_counter_source(&Policy::fixed_window("10/1s,100/1m").unwrap()).is_none());
/// ```
pub fn fixed_window_counter_source(policy: &Policy) -> Option<String> {
    Counter::of(policy).map(|_| script_source(policy, true))
}

/// The scripts of one backend, one per family, made on first use. Redis
/// forgets scripts (a restart, a failover, resharding to a new node,
/// `SCRIPT FLUSH`): the calls that meet `NOSCRIPT` then wait for one reload
/// of every script made here and try again, instead of each sending its
/// own `SCRIPT LOAD`.
pub(crate) struct Registry {
    /// The scripts are flagged to reach a cluster node's other slots.
    cross_slot: bool,
    scripts: [OnceLock<Arc<Script>>; FAMILIES],
    /// The script was loaded ahead of its first call.
    loaded: [AtomicBool; FAMILIES],
    /// Reloads finished: a call that sent its `EVALSHA` before the latest
    /// one started does not reload again.
    reloads: AtomicU64,
    reloading: tokio::sync::Mutex<()>,
}

impl Registry {
    pub(crate) fn new(cross_slot: bool) -> Registry {
        Registry {
            cross_slot,
            scripts: Default::default(),
            loaded: Default::default(),
            reloads: AtomicU64::new(0),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    /// The script of `family`, made the first time it is asked for.
    pub(crate) fn script(&self, family: Family) -> &Arc<Script> {
        self.scripts[family.index()].get_or_init(|| Arc::new(Script::new(&family.source(self.cross_slot))))
    }

    /// Whether `family`'s script was loaded ahead of its first call.
    pub(crate) fn loaded(&self, family: Family) -> &AtomicBool {
        &self.loaded[family.index()]
    }

    /// Reloads finished so far; read before sending an `EVALSHA`.
    pub(crate) fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Acquire)
    }

    /// Loads every script made so far again, unless another call did since `reloads_before`.
    pub(crate) async fn reload(&self, connection: &mut Connection, reloads_before: u64) -> RedisResult<()> {
        let _running = self.reloading.lock().await;
        if self.reloads() != reloads_before {
            return Ok(());
        }
        tracing::info!(target: "redlimit", "Redis lost the rate limit scripts (restart, failover or SCRIPT FLUSH); loading them again");
        for script in self.scripts.iter().filter_map(OnceLock::get) {
            script.prepare_invoke().load_async(connection).await?;
        }
        self.reloads.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(numbers: &[u8]) -> Vec<f64> {
        numbers.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn each_family_has_its_reply_and_its_numbers_travel_with_the_call() {
        let gcra = plan(&Policy::gcra("1000/1s", 999).unwrap(), true);
        assert_eq!((gcra.family, read(&gcra.policy)), (Family::Gcra, vec![999.0, 1.0, 1000.0]));
        assert_eq!(gcra.reply, Reply::Bucket { kind: AlgorithmKind::Gcra, constants: [999, 1, 1000] });
        let leaky = plan(&Policy::leaky_bucket(5, "7/3s").unwrap(), false);
        assert_eq!(leaky.reply, Reply::Bucket { kind: AlgorithmKind::LeakyBucket, constants: [5, 7, 3_000_000] });

        let one = Policy::fixed_window("10/1s").unwrap();
        let counter = plan(&one, true);
        assert_eq!(
            (counter.family, counter.reply),
            (Family::Counter, Reply::Counter(Counter { limit: 10, window_ms: 1000 }))
        );
        assert_eq!((read(&counter.policy[..8]), &counter.policy[8..]), (vec![10.0], &b"1000"[..]));
        assert_eq!(plan(&one, false).reply, Reply::Window { quotas: 0 }, "a client clock: the hash layout");
        let two = plan(&Policy::fixed_window("10/1s,100/1m").unwrap(), true);
        assert_eq!(read(&two.policy), [0.0, 10.0, 1e6, 100.0, 6e7]);
        assert_eq!(two.reply, Reply::Window { quotas: 2 });
    }

    #[test]
    fn many_sub_windows_take_the_totals_layout() {
        let family = |s: &str| plan(&Policy::sliding_window(s, "100ms").unwrap(), true).family;
        assert_eq!(family("12/1600ms"), Family::SlidingWindowTotals);
        assert_eq!(family("12/1500ms"), Family::SlidingWindow);
        let hash = plan(&Policy::sliding_window("12/1500ms", "100ms").unwrap(), true);
        assert_eq!(read(&hash.policy), [100_000.0, 12.0, 1_500_000.0]);
    }

    #[test]
    fn the_sliding_log_holds_as_many_entries_as_its_twin() {
        let bound = format!("local max_entries = {}\n", crate::algo::SLIDING_LOG_MAX_ENTRIES);
        assert!(SLIDING_LOG.contains(&bound));
    }

    #[test]
    fn only_the_counter_decides_without_clock_lua() {
        for family in Family::ALL {
            assert_eq!(family.source(false).contains(CLOCK), family != Family::Counter);
            assert!(family.source(false).contains(PRELUDE));
        }
    }

    #[test]
    fn only_a_cross_slot_script_is_flagged_and_says_so() {
        let (plain, flagged) = (Family::Gcra.source(false), Family::Gcra.source(true));
        assert!(plain.starts_with("local cross_slot = false\n"));
        assert!(flagged.starts_with(CROSS_SLOT) && flagged.contains("\nlocal cross_slot = true\n"));
        assert!(HEAD.contains("local function redis_time()"));
    }

    #[test]
    fn a_family_has_one_script_whatever_the_policy() {
        let registry = Registry::new(false);
        let policies = [Policy::gcra("7/3s", 2).unwrap(), Policy::gcra("1/1h", 90).unwrap()];
        let [one, two] = policies.map(|p| Arc::as_ptr(registry.script(plan(&p, true).family)));
        assert_eq!(one, two);
        assert_eq!(registry.scripts.iter().filter(|s| s.get().is_some()).count(), 1);
    }
}
