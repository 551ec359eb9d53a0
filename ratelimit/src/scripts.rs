//! The script registry: one `redis::Script` per algorithm, from `lua/`.

use once_cell::sync::Lazy;
use ratelimit_grammar::AlgorithmKind;
use redis::Script;

/// Each script's source, in [`AlgorithmKind::ALL`] order. The window
/// algorithms: the shared prelude (`key`, `now`, `cost` from ARGV), then
/// the algorithm. The buckets and gcra are templates made into one script
/// per policy (`policy_scripts`): the prelude of optional ARGV, the
/// algorithm (for the buckets, then `bucket_state`: their new state), then
/// `set_state` (how their one-string state is written, its TTL, and their
/// one reply), all behind the line of constants each policy puts first.
const SOURCES: [&str; 6] = [
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/fixed_window.lua")),
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/sliding_window.lua")),
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/sliding_log.lua")),
    concat!(
        include_str!("../lua/policy_prelude.lua"),
        include_str!("../lua/token_bucket.lua"),
        include_str!("../lua/bucket_state.lua"),
        include_str!("../lua/set_state.lua")
    ),
    concat!(
        include_str!("../lua/policy_prelude.lua"),
        include_str!("../lua/leaky_bucket.lua"),
        include_str!("../lua/bucket_state.lua"),
        include_str!("../lua/set_state.lua")
    ),
    concat!(
        include_str!("../lua/policy_prelude.lua"),
        include_str!("../lua/gcra.lua"),
        include_str!("../lua/set_state.lua")
    ),
];

/// The sliding window's totals layout (`lua/sliding_window_totals.lua`): the
/// same KEYS, ARGV and answers as the hash layout, O(1) per call however
/// many sub-windows a window holds.
const SLIDING_WINDOW_TOTALS: &str =
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/sliding_window_totals.lua"));

/// The fixed window of one strategy on the server's clock
/// (`lua/fixed_window_counter.lua`): a counter whose TTL is the window,
/// answered with one integer. Stands alone: it reads no `now`; each policy
/// puts its constants in front of it (`backend::Counter::source`).
pub(crate) const FIXED_WINDOW_COUNTER: &str = include_str!("../lua/fixed_window_counter.lua");

/// From this many sub-windows in the widest window on, a sliding window is
/// decided by the totals layout. Measured (instructions per call under
/// callgrind, every sub-window holding hits, BENCHMARKS.md): the hash layout
/// costs 110k at 4 sub-windows, 154k at 10, 196k at 16 and 307k at 32; the
/// totals layout 140k to 145k throughout. The two cross near 8; 16 leaves a
/// margin for keys whose sub-windows are not all in use, where the hash
/// layout reads fewer fields.
pub(crate) const TOTALS_FROM_SUB_WINDOWS: u64 = 16;

// `Script` hashes its source once; invocations send EVALSHA and reload on
// NOSCRIPT. One per algorithm in [`AlgorithmKind::ALL`] order, then the
// totals layout. The fixed window counters are made per policy, as used.
static SCRIPTS: Lazy<Vec<Script>> =
    Lazy::new(|| SOURCES.iter().chain([&SLIDING_WINDOW_TOTALS]).map(|source| Script::new(source)).collect());

/// The script that decides `kind`.
pub(crate) fn script(kind: AlgorithmKind) -> &'static Script {
    let index = AlgorithmKind::ALL.iter().position(|k| *k == kind).expect("every kind has a script");
    &SCRIPTS[index]
}

/// The sliding window's totals layout, for windows of many sub-windows.
pub(crate) fn sliding_window_totals() -> &'static Script {
    &SCRIPTS[SOURCES.len()]
}

/// Every script that runs as it is (the window algorithms and the totals
/// layout), for loading them all at start-up and after NOSCRIPT; the
/// scripts made per policy are in `policy_scripts::made`.
pub(crate) fn all() -> impl Iterator<Item = &'static Script> {
    let per_policy = |i: usize| i < SOURCES.len() && is_made_per_policy(AlgorithmKind::ALL[i]);
    SCRIPTS.iter().enumerate().filter(move |(i, _)| !per_policy(*i)).map(|(_, script)| script)
}

/// The algorithms whose script is made per policy, its parameters written in.
pub(crate) fn is_made_per_policy(kind: AlgorithmKind) -> bool {
    matches!(kind, AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket | AlgorithmKind::Gcra)
}

/// The source of an algorithm's script, e.g. to run it by hand with `EVAL`.
/// For token_bucket, leaky_bucket and gcra it is the template each policy's
/// script is made from; [`policy_script_source`](crate::policy_script_source)
/// gives the script that runs.
///
/// ```
/// let source = ratelimit::script_source(ratelimit::AlgorithmKind::Gcra);
/// assert!(source.contains("KEYS[1]"));
/// ```
pub fn script_source(kind: AlgorithmKind) -> &'static str {
    let index = AlgorithmKind::ALL.iter().position(|k| *k == kind).expect("every kind has a script");
    SOURCES[index]
}

/// The source of the script that decides `policy` on Redis's own clock when
/// it is a fixed window of one strategy: a counter whose TTL is the window,
/// with the policy's limit and window written in (see
/// [`Policy::fixed_window`](crate::Policy::fixed_window) for when it is
/// used). `None` for any other policy.
///
/// ```
/// use ratelimit::{fixed_window_counter_source, Policy};
///
/// let source = fixed_window_counter_source(&Policy::fixed_window("10/1s").unwrap()).unwrap();
/// assert!(source.starts_with("local limit, window, window_text = 10, 1000, '1000'"));
/// assert!(source.contains("INCR") && !source.contains("TIME"));
/// assert!(fixed_window_counter_source(&Policy::fixed_window("10/1s,100/1m").unwrap()).is_none());
/// ```
pub fn fixed_window_counter_source(policy: &crate::Policy) -> Option<String> {
    crate::backend::Counter::of(policy).map(|counter| counter.source())
}
