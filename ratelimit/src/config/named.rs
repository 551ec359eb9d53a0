//! [`NamedLimiter`]: a limiter whose policy is a named one from the
//! configured set, rebuilt on the first call after a reload changes it
//! (`LazyLimiter` holds one for a named policy).

use super::registry::{self, Loaded};
use crate::global;
use crate::limiter::on_error::OnError;
use crate::limiter::Limiter;
use crate::policy::Policy;
use crate::store::Store;
use arc_swap::ArcSwapOption;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The limiter for one generation of the policy set.
#[derive(Debug)]
pub(crate) struct Configured {
    generation: u64,
    /// Built on a store that could not be built: try the store again next call.
    degraded: bool,
    /// `Err`: why the policy cannot be used (not configured, or the set failed to load).
    pub(crate) limiter: Result<Limiter, Arc<str>>,
}

/// A limiter applying the configured policy `policy` on the global store.
#[derive(Debug)]
pub(crate) struct NamedLimiter {
    policy: Cow<'static, str>,
    on_error: OnError,
    configured: ArcSwapOption<Configured>,
}

impl NamedLimiter {
    pub(crate) const fn new(policy: Cow<'static, str>, on_error: OnError) -> NamedLimiter {
        NamedLimiter { policy, on_error, configured: ArcSwapOption::const_empty() }
    }

    /// The configured policy's name.
    pub(crate) fn policy(&self) -> &str {
        &self.policy
    }

    /// [`current`](Self::current)'s common path, without a future: the
    /// limiter already built for the policy set in use (on a working store),
    /// if there is one.
    #[inline]
    pub(crate) fn cached(&self) -> Option<Arc<Configured>> {
        let cached = self.configured.load_full()?;
        (cached.generation == registry::current().generation && !cached.degraded).then_some(cached)
    }

    /// The limiter for the policy set in use, and whether it is the first
    /// one built on a working store. The common path is two atomic loads
    /// (the set's snapshot, this limiter's) and a compare of generations:
    /// no lock, no allocation.
    pub(crate) async fn current(&self, name: &str) -> (Arc<Configured>, bool) {
        if let Some(cached) = self.cached() {
            return (cached, false);
        }
        let loaded = registry::current();
        let cached = self.configured.load_full();
        let mut first = false;
        let fresh = match loaded.set.get(&self.policy) {
            None => Configured {
                generation: loaded.generation,
                degraded: false,
                limiter: Err(missing(&self.policy, &loaded).into()),
            },
            // The same policy as before (a reload that changed other ones):
            // keep the limiter, and with it its deny cache and local state.
            Some(p)
                if cached
                    .as_ref()
                    .is_some_and(|c| !c.degraded && c.limiter.as_ref().is_ok_and(|l| l.whole_policy() == p)) =>
            {
                let limiter = cached.as_ref().and_then(|c| c.limiter.clone().ok()).expect("checked just above");
                Configured { generation: loaded.generation, degraded: false, limiter: Ok(limiter) }
            }
            Some(p) => {
                let (p, generation) = (p.clone(), loaded.generation);
                // Tagged with the generation read before awaiting: if a reload
                // lands meanwhile, the next call sees the mismatch and rebuilds.
                drop(loaded);
                // Boxed: building the store is a deep future (see `Site`).
                let store: Pin<Box<dyn Future<Output = Result<&'static Store, crate::error::Error>> + Send>> =
                    Box::pin(global::global());
                match store.await {
                    Ok(store) => {
                        first = cached.is_none();
                        Configured {
                            generation,
                            degraded: false,
                            limiter: Ok(Limiter::new(name, p, store).with_on_error(self.on_error)),
                        }
                    }
                    // Keep the degraded limiter of this generation (its local state) while the store stays down.
                    Err(_)
                        if cached.as_ref().is_some_and(|c| {
                            c.degraded && c.limiter.as_ref().is_ok_and(|l| *l.whole_policy() == p)
                        }) =>
                    {
                        return (cached.expect("checked just above"), false);
                    }
                    Err(error) => {
                        let limiter = Limiter::unavailable(name, &p, error, self.on_error);
                        Configured { generation, degraded: true, limiter: Ok(limiter) }
                    }
                }
            }
        };
        let fresh = Arc::new(fresh);
        self.configured.store(Some(fresh.clone()));
        (fresh, first)
    }
}

impl NamedLimiter {
    /// The configured policy in the set in use, or why there is none.
    pub(crate) fn configured_policy(&self) -> Result<Policy, Arc<str>> {
        let loaded = registry::current();
        loaded.set.get(&self.policy).cloned().ok_or_else(|| missing(&self.policy, &loaded).into())
    }
}

/// Why `policy` cannot be used with the set in `loaded`.
fn missing(policy: &str, loaded: &Loaded) -> String {
    // The name may come from a caller at run time (an HTTP layer's `named`).
    let policy = redlimit_grammar::quote(policy);
    if let Some(note) = &loaded.note {
        return format!("policy \"{policy}\" is not configured: {note}");
    }
    let names: Vec<_> = loaded.set.names().collect();
    if names.is_empty() {
        format!("policy \"{policy}\" is not configured: {} holds no policies", loaded.set.origin())
    } else {
        format!("policy \"{policy}\" is not configured in {} (it has: {})", loaded.set.origin(), names.join(", "))
    }
}
