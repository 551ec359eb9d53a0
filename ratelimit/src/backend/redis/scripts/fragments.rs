//! The Lua files a script is made of (`lua/`), and how one family's
//! fragments join into one script (`lua/README.md` draws it).

pub(super) const HEAD: &str = include_str!("../../../../lua/head.lua");
pub(super) const PRELUDE: &str = include_str!("../../../../lua/prelude.lua");
pub(super) const POLICY_WINDOWS: &str = include_str!("../../../../lua/policy_windows.lua");
pub(super) const POLICY_SLIDING_WINDOW: &str = include_str!("../../../../lua/policy_sliding_window.lua");
pub(super) const POLICY_BUCKET: &str = include_str!("../../../../lua/policy_bucket.lua");
pub(super) const POLICY_GCRA: &str = include_str!("../../../../lua/policy_gcra.lua");
pub(super) const POLICY_CONCURRENCY: &str = include_str!("../../../../lua/policy_concurrency.lua");
pub(super) const POLICY_COUNTER: &str = include_str!("../../../../lua/policy_counter.lua");
pub(super) const CLOCK: &str = include_str!("../../../../lua/clock.lua");
pub(super) const WINDOW: &str = include_str!("../../../../lua/window.lua");
pub(super) const FIXED_WINDOW: &str = include_str!("../../../../lua/fixed_window.lua");
pub(super) const FIXED_WINDOW_COUNTER: &str = include_str!("../../../../lua/fixed_window_counter.lua");
pub(super) const SLIDING_WINDOW: &str = include_str!("../../../../lua/sliding_window.lua");
pub(super) const SLIDING_LOG: &str = include_str!("../../../../lua/sliding_log.lua");
pub(super) const TOKEN_BUCKET: &str = include_str!("../../../../lua/token_bucket.lua");
pub(super) const LEAKY_BUCKET: &str = include_str!("../../../../lua/leaky_bucket.lua");
pub(super) const GCRA: &str = include_str!("../../../../lua/gcra.lua");
pub(super) const CONCURRENCY: &str = include_str!("../../../../lua/concurrency.lua");
pub(super) const BUCKET_READ: &str = include_str!("../../../../lua/bucket_read.lua");
pub(super) const BUCKET_STATE: &str = include_str!("../../../../lua/bucket_state.lua");
pub(super) const SET_STATE: &str = include_str!("../../../../lua/set_state.lua");
pub(super) const BATCH: &str = include_str!("../../../../lua/batch.lua");

/// The first line that lets a script on Redis 7 or later touch keys of
/// several slots of one cluster node: a cluster batch's keys share a node,
/// not always a slot. A cluster whose masters take it runs every script
/// with it (and `cross_slot` set, so a batch checks its keys first).
pub(crate) const CROSS_SLOT: &str = "#!lua flags=allow-cross-slot-keys\n";

/// One family's script: `fragments` is its policy reader, then its
/// algorithm's fragments, joined as `lua/README.md` draws it, so a batch
/// reads a policy once and decides each call with the `decide` it returns.
pub(super) fn join(fragments: &[&str], cross_slot: bool) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sliding_log_holds_as_many_entries_as_its_twin() {
        let bound = format!("local max_entries = {}\n", crate::algo::SLIDING_LOG_MAX_ENTRIES);
        assert!(SLIDING_LOG.contains(&bound));
    }
}
