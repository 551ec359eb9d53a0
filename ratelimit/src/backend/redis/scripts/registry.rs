//! [`ScriptRegistry`]: the scripts a backend uses, made on first use, and loaded
//! again after Redis loses them.

use super::family::{Family, FAMILIES};
use crate::backend::redis::connection::Connection;
use redis::{RedisResult, Script};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The scripts of one backend, one per family, made on first use. Redis
/// forgets scripts (a restart, a failover, resharding to a new node,
/// `SCRIPT FLUSH`): the calls that meet `NOSCRIPT` then wait for one reload
/// of every script made here and try again, instead of each sending its
/// own `SCRIPT LOAD`.
pub(crate) struct ScriptRegistry {
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

impl ScriptRegistry {
    pub(crate) fn new(cross_slot: bool) -> ScriptRegistry {
        ScriptRegistry {
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
    use super::super::plan::plan;
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn a_family_has_one_script_whatever_the_policy() {
        let registry = ScriptRegistry::new(false);
        let policies = [Policy::gcra("7/3s", 2).unwrap(), Policy::gcra("1/1h", 90).unwrap()];
        let [one, two] = policies.map(|p| Arc::as_ptr(registry.script(plan(&p, true).family)));
        assert_eq!(one, two);
        assert_eq!(registry.scripts.iter().filter(|s| s.get().is_some()).count(), 1);
    }
}
