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
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// What tells two policies' scripts apart: the algorithm and its constants.
pub(crate) type PolicyScriptKey = (AlgorithmKind, [u64; 3]);

/// Every script made in this process, by what tells it apart. Looked up
/// only on a policy's first call: the policy keeps its script
/// ([`ScriptSlot`]) for the calls after.
static MADE: Lazy<ArcSwap<HashMap<PolicyScriptKey, Arc<Script>>>> = Lazy::new(ArcSwap::default);

/// Where a [`Policy`] keeps the script made for it: set on the policy's
/// first call, then read with one atomic load (a lookup by key, even in a
/// per-thread map, cost a decision about 185 client instructions, issue 6).
/// A cache, so it takes no part in comparing policies; a clone shares it.
#[derive(Clone)]
pub(crate) struct ScriptSlot(OnceLock<Arc<Script>>);

impl ScriptSlot {
    pub(crate) const fn new() -> ScriptSlot {
        ScriptSlot(OnceLock::new())
    }

    /// The script of the policy this slot belongs to, whose key is `key`:
    /// made from `source()` if this process has none yet. The flag says
    /// this call made it (Redis has not seen it: load it first).
    pub(crate) fn get_or_make(&self, key: PolicyScriptKey, source: impl FnOnce() -> String) -> (&Script, bool) {
        if let Some(script) = self.0.get() {
            return (script, false);
        }
        let (script, made) = get_or_make(key, source);
        (self.0.get_or_init(|| script), made)
    }
}

impl PartialEq for ScriptSlot {
    fn eq(&self, _: &ScriptSlot) -> bool {
        true
    }
}

impl Eq for ScriptSlot {}

/// The script for `key`, made from `source()` if this process has none yet;
/// the flag says this call made it.
fn get_or_make(key: PolicyScriptKey, source: impl FnOnce() -> String) -> (Arc<Script>, bool) {
    if let Some(script) = MADE.load().get(&key) {
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
    // The rate as the policy reduced it once (a gcd per call cost ~60 instructions).
    let (n, p) = policy.reduced_rate;
    match &policy.params {
        Params::TokenBucket { capacity, .. } | Params::LeakyBucket { capacity, .. } => {
            Some((policy.algorithm(), [*capacity, n, p]))
        }
        Params::Gcra { burst, .. } => Some((AlgorithmKind::Gcra, [*burst, n, p])),
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
            invocation
                .arg(request.cost)
                .arg(u8::from(request.peek))
                .arg(now)
                .arg(crate::backend::CLIENT_CLOCK_SLACK_US / 1000);
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
    fn a_policy_keeps_its_script_and_its_clones_share_it() {
        let policy = Policy::gcra("7/3s", 2).unwrap();
        let key = bucket_key(&policy).unwrap();
        let (first, _) = policy.script.get_or_make(key, || bucket_source(key));
        let hash = first.get_hash().to_owned();
        let clone = policy.clone();
        let (kept, made) = clone.script.get_or_make(key, || unreachable!("kept by the policy"));
        assert_eq!((kept.get_hash(), made), (&hash[..], false));
        // Another policy with the same constants finds the same script, not a new one.
        let same = Policy::gcra("7/3s", 2).unwrap();
        let (found, made) = same.script.get_or_make(key, || unreachable!("made once per process"));
        assert_eq!((found.get_hash(), made), (&hash[..], false));
        assert_eq!(policy, Policy::gcra("7/3s", 2).unwrap(), "whether the slot is set takes no part in equality");
    }

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
