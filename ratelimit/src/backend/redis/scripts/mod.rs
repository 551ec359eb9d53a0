//! The scripts' text and the values a policy sends, for the tests,
//! examples and the bench (`redlimit::__private`): one script per family of
//! algorithm (`family.rs`, made from `lua/` by `fragments.rs`), whatever the
//! policy, whose numbers travel with each call (`plan.rs`).
//!
//! The folder owns the scripts and what goes through them: the families
//! (`family.rs`) and the Lua they are made of (`fragments.rs`), a backend's
//! scripts, loaded again after `NOSCRIPT` (`registry.rs`), a policy's plan
//! (`plan.rs`) and what a call sends (`arguments.rs`), how a reply reads
//! (`reply.rs`), the fixed window kept as a counter (`counter.rs`), and a
//! calendar policy's plan per calendar window (`calendar.rs`).

pub(super) mod arguments;
pub(super) mod calendar;
pub(crate) mod counter;
pub(super) mod family;
pub(super) mod fragments;
pub(super) mod plan;
pub(super) mod registry;
mod reply;

use self::counter::Counter;
use self::family::Family;
use self::plan::{plan, windows};
use crate::policy::{Policy, Strategy};

/// The source of the script that decides `policy` on Redis, e.g. to run it
/// by hand with `EVAL`, its ARGV starting with [`policy_argument`]'s
/// (`lua/README.md`). Every policy of one family shares it.
/// `server_clock`: decided on Redis's own clock (no time sent), where a
/// fixed window of one strategy is a counter (see
/// [`fixed_window_counter_source`]).
///
/// ```
/// use redlimit::__private::script_source;
/// use redlimit::Policy;
///
/// let source = script_source(&Policy::token_bucket(10, "2/6s").unwrap(), true);
/// assert!(source.contains("local capacity, n, p, step = struct_unpack('<dddd', policy)\n"));
/// assert!(source.contains("return reply, now\n"), "the bucket reply, packed by batch.lua");
/// assert!(source.ends_with("return replies\n"), "every script decides one call or a batch");
/// assert_eq!(source, script_source(&Policy::token_bucket(7, "1/1h").unwrap(), true), "one script per family");
/// ```
pub fn script_source(policy: &Policy, server_clock: bool) -> String {
    plan(policy, server_clock).family.source(false)
}

/// The policy's numbers as its script reads them: the first ARGV of a call
/// (`lua/README.md`).
///
/// ```
/// use redlimit::__private::policy_argument;
/// use redlimit::Policy;
///
/// let numbers = policy_argument(&Policy::gcra("2/6s", 4).unwrap(), true);
/// let read: Vec<f64> = numbers.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
/// assert_eq!(read, [4.0, 1.0, 3_000_000.0], "burst, then the rate: 1 unit per 3 000 000 µs");
/// let counter = policy_argument(&Policy::fixed_window("10/1s").unwrap(), true);
/// assert_eq!(counter[8..], 1000f64.to_le_bytes(), "a counter's window, in ms");
/// ```
pub fn policy_argument(policy: &Policy, server_clock: bool) -> Vec<u8> {
    plan(policy, server_clock).policy
}

/// The source of the sliding window script and the ARGV of a policy of
/// `strategies` as (limit, window in µs) on sub-windows of `precision_us`,
/// sent as they are (no check that the precision divides the windows). For
/// the tests and the bench that drive the script directly.
///
/// ```
/// use redlimit::__private::sliding_window_source;
///
/// let (source, numbers) = sliding_window_source(100_000, &[(5, 1_000_000)]);
/// assert!(source.contains("sliding_window.lua"));
/// assert_eq!(numbers.len(), 24, "the precision, then one limit and window");
/// ```
pub fn sliding_window_source(precision_us: u64, strategies: &[(u64, u64)]) -> (String, Vec<u8>) {
    let strategies: Vec<Strategy> =
        strategies.iter().map(|&(limit, window_us)| Strategy::new(limit, window_us)).collect();
    (Family::SlidingWindow.source(false), windows(precision_us, &strategies))
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
/// assert!(source.contains("local limit, window = struct_unpack('<dd', policy)"));
/// assert!(source.contains("INCR") && source.contains("PEXPIRE"));
/// assert!(fixed_window_counter_source(&Policy::fixed_window("10/1s,100/1m").unwrap()).is_none());
/// ```
pub fn fixed_window_counter_source(policy: &Policy) -> Option<String> {
    Counter::of(policy).map(|_| script_source(policy, true))
}
