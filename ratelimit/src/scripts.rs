//! The script registry: one `redis::Script` per algorithm, from `lua/`.

use once_cell::sync::Lazy;
use ratelimit_grammar::AlgorithmKind;
use redis::Script;

/// Each script's source, in [`AlgorithmKind::ALL`] order: the shared
/// prelude (`key`, `now`, `cost`) followed by the algorithm.
const SOURCES: [&str; 6] = [
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/fixed_window.lua")),
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/sliding_window.lua")),
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/sliding_log.lua")),
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/token_bucket.lua")),
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/leaky_bucket.lua")),
    concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/gcra.lua")),
];

// `Script` hashes its source once; invocations send EVALSHA and reload on NOSCRIPT.
static SCRIPTS: Lazy<Vec<Script>> = Lazy::new(|| SOURCES.iter().map(|source| Script::new(source)).collect());

/// The script that decides `kind`.
pub(crate) fn script(kind: AlgorithmKind) -> &'static Script {
    let index = AlgorithmKind::ALL.iter().position(|k| *k == kind).expect("every kind has a script");
    &SCRIPTS[index]
}

/// Every script, for loading them all at start-up and after a reconnect.
pub(crate) fn all() -> &'static [Script] {
    &SCRIPTS
}

/// The source of an algorithm's script, e.g. to run it by hand with `EVAL`.
///
/// ```
/// let source = ratelimit::script_source(ratelimit::AlgorithmKind::Gcra);
/// assert!(source.contains("KEYS[1]"));
/// ```
pub fn script_source(kind: AlgorithmKind) -> &'static str {
    let index = AlgorithmKind::ALL.iter().position(|k| *k == kind).expect("every kind has a script");
    SOURCES[index]
}
