//! Scripts made once per policy: its parameters written into the source as
//! constants, so a call sends no ARGV for them (issue 6: each ARGV costs
//! Redis about 1 500 instructions, and reading a number from it 800 more).
//!
//! token_bucket, leaky_bucket and gcra are always decided this way
//! (`lua/policy_prelude.lua` says which ARGV remain, all optional), and the
//! fixed window counter (`backend::Counter`) too. Each script is made on its
//! policy's first call in this process, loaded before its first `EVALSHA`,
//! and loaded again with every other script when Redis answers `NOSCRIPT`.

use crate::backend::Request;
use crate::policy::{Params, Policy};
use arc_swap::ArcSwap;
use once_cell::sync::Lazy;
use ratelimit_grammar::AlgorithmKind;
use redis::Script;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// What tells two policies' scripts apart: the algorithm and its constants.
pub(crate) type PolicyScriptKey = (AlgorithmKind, [u64; 3]);

/// Every script made in this process: a lock-free read per call.
static MADE: Lazy<ArcSwap<Scripts>> = Lazy::new(ArcSwap::default);

type Scripts = HashMap<PolicyScriptKey, Arc<Script>, BuildHasherDefault<KeyHasher>>;

/// Hashes a [`PolicyScriptKey`] in a few instructions (SipHash took about
/// 300 of a decision's client cost, issue 6). Its keys come from the
/// policies in code and configuration, not from requests, so there is no
/// flood of chosen keys to resist.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The script for `key`, made from `source()` if this process has none yet;
/// the flag says this call made it (Redis has not seen it: load it first).
pub(crate) fn get_or_make(key: PolicyScriptKey, source: impl FnOnce() -> String) -> (Arc<Script>, bool) {
    thread_local! {
        /// The scripts this thread has looked up: a call reads no shared
        /// state (an `ArcSwap` load took its slow path here, about 190
        /// instructions, as the connection manager holds guards across
        /// every request in flight). Scripts are never removed, so a copy
        /// never goes stale.
        static SEEN: RefCell<Scripts> = RefCell::default();
    }
    if let Ok(Some(script)) = SEEN.try_with(|seen| seen.borrow().get(&key).cloned()) {
        return (script, false);
    }
    if let Some(script) = MADE.load().get(&key) {
        let _ = SEEN.try_with(|seen| seen.borrow_mut().insert(key, script.clone()));
        return (script.clone(), false);
    }
    let script = Arc::new(Script::new(&source()));
    let mut made = false;
    MADE.rcu(|scripts| {
        let mut scripts = HashMap::clone(scripts);
        made = !scripts.contains_key(&key);
        scripts.entry(key).or_insert_with(|| script.clone());
        scripts
    });
    (MADE.load()[&key].clone(), made)
}

/// The scripts made so far, to load again when Redis has lost them.
pub(crate) fn made() -> Vec<Arc<Script>> {
    MADE.load().values().cloned().collect()
}

/// The constants of a bucket or gcra policy: (capacity or burst, n, p), the
/// rate in lowest terms, n per p µs. `None` for the window algorithms.
pub(crate) fn bucket_key(policy: &Policy) -> Option<PolicyScriptKey> {
    match &policy.params {
        Params::TokenBucket { capacity, rate } | Params::LeakyBucket { capacity, rate } => {
            let (n, p) = rate.reduced();
            Some((policy.algorithm(), [*capacity, n, p]))
        }
        Params::Gcra { rate, burst } => {
            let (n, p) = rate.reduced();
            Some((AlgorithmKind::Gcra, [*burst, n, p]))
        }
        _ => None,
    }
}

/// The full source of a bucket or gcra policy's script: its constants, then
/// the shared template (`script_source` of its algorithm).
pub(crate) fn bucket_source((kind, [first, n, p]): PolicyScriptKey) -> String {
    let name = if kind == AlgorithmKind::Gcra { "burst" } else { "capacity" };
    format!("local {name}, n, p = {first}, {n}, {p}\n{}", crate::scripts::script_source(kind))
}

/// The optional ARGV of `lua/policy_prelude.lua`, as few as the call allows:
/// cost, peek, now and slack, each sent only when it or a later one differs
/// from the common call (cost 1, a check, the server's clock).
pub(crate) fn arguments(invocation: &mut redis::Cmd, request: &Request<'_>) {
    match request.now_us {
        Some(now) => {
            invocation.arg(request.cost).arg(u8::from(request.peek)).arg(now).arg(crate::backend::CLIENT_CLOCK_SLACK_US / 1000);
        }
        None if request.peek => {
            invocation.arg(request.cost).arg(1);
        }
        None if request.cost != 1 => {
            invocation.arg(request.cost);
        }
        None => {}
    }
}

/// The source of the script the runtime makes for `policy` when it is a
/// token bucket, a leaky bucket or gcra: the policy's parameters written in
/// as constants, then the algorithm's script (see `lua/policy_prelude.lua`
/// for the ARGV it takes, all optional). It replies 16 bytes, two
/// little-endian doubles: a number the decision is rebuilt from with the
/// policy's constants, and the time it decided at (`lua/set_state.lua`).
/// `None` for the window algorithms, whose one script per algorithm takes
/// the parameters as ARGV.
///
/// ```
/// use ratelimit::{policy_script_source, Policy};
///
/// let source = policy_script_source(&Policy::token_bucket(10, "2/6s").unwrap()).unwrap();
/// assert!(source.starts_with("local capacity, n, p = 10, 1, 3000000\n"));
/// assert!(source.ends_with("return struct.pack('<dd', reply, now)\n"));
/// assert!(policy_script_source(&Policy::sliding_log("10/1s").unwrap()).is_none());
/// ```
pub fn policy_script_source(policy: &Policy) -> Option<String> {
    bucket_key(policy).map(bucket_source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_script_per_policy_made_once() {
        let key = (AlgorithmKind::Gcra, [7, 1, 1500]);
        let (first, made_now) = get_or_make(key, || bucket_source(key));
        assert!(made_now);
        let (again, made_again) = get_or_make(key, || unreachable!("made once"));
        assert!(!made_again);
        assert_eq!(first.get_hash(), again.get_hash());
        let other = (AlgorithmKind::Gcra, [8, 1, 1500]);
        assert_ne!(get_or_make(other, || bucket_source(other)).0.get_hash(), first.get_hash());
        assert!(made().iter().any(|s| s.get_hash() == first.get_hash()));
    }

    #[test]
    fn buckets_and_gcra_have_their_constants_written_in() {
        let gcra = Policy::gcra("1000/1s", 999).unwrap();
        assert_eq!(bucket_key(&gcra), Some((AlgorithmKind::Gcra, [999, 1, 1000])));
        assert!(bucket_source(bucket_key(&gcra).unwrap()).starts_with("local burst, n, p = 999, 1, 1000\n"));
        let leaky = Policy::leaky_bucket(5, "7/3s").unwrap();
        assert_eq!(bucket_key(&leaky), Some((AlgorithmKind::LeakyBucket, [5, 7, 3_000_000])));
        assert_eq!(bucket_key(&Policy::fixed_window("1/1s").unwrap()), None);
    }
}
