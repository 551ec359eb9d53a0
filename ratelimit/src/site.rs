//! [`Site`]: one annotated function's limiter, and the calls its generated
//! code makes. Not a public API: it changes with the macro, which is pinned
//! to this crate.

use crate::backend::Refunded;
use crate::lazy::LazyLimiter;
use crate::permit::Holding;
use crate::prefetch::SitePrefetch;
use crate::refund::SiteRefunds;
use crate::{OnError, Policy, RateLimited};
use std::borrow::Cow;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// What a denied call does.
#[derive(Debug, Clone, Copy)]
pub enum OnLimit {
    /// Return `Err(RateLimited.into())` (or call the fallback: decided by the generated code).
    Error,
    /// Sleep until `retry_after` and try again, for at most this long in total (`None`: unbounded).
    Wait(Option<Duration>),
}

/// One annotated function's limiter, built on its first call on the global store.
#[derive(Debug)]
pub struct Site {
    name: &'static str,
    limiter: LazyLimiter,
    on_limit: OnLimit,
    named_by_default: bool,
    /// `dry_run = true`: decided and recorded, never denied.
    dry_run: bool,
    refunds: SiteRefunds,
    prefetch: SitePrefetch,
}

impl Site {
    /// A site; `policy` comes from a constant the macro validated at compile time.
    pub const fn new(name: &'static str, policy: Policy, on_limit: OnLimit, on_error: OnError) -> Site {
        let limiter = LazyLimiter::fixed(Cow::Borrowed(name), policy, on_error);
        Site::of(name, limiter, on_limit)
    }

    /// A site whose policy is the one named `policy` in the configured set
    /// (`#[rate_limit(policy = "search")]`), followed across reloads.
    pub const fn configured(name: &'static str, policy: &'static str, on_limit: OnLimit, on_error: OnError) -> Site {
        let limiter = LazyLimiter::named(Cow::Borrowed(name), Cow::Borrowed(policy), on_error);
        Site::of(name, limiter, on_limit)
    }

    /// A site whose every call gives its policy
    /// (`#[rate_limit(policy = plan_policy(&user))]`): see [`check_with`](Self::check_with).
    pub const fn per_call(name: &'static str, on_limit: OnLimit, on_error: OnError) -> Site {
        let limiter = LazyLimiter::per_call(Cow::Borrowed(name), on_error);
        Site::of(name, limiter, on_limit)
    }

    /// The constructors' common part: everything else starts off.
    const fn of(name: &'static str, limiter: LazyLimiter, on_limit: OnLimit) -> Site {
        Site {
            name,
            limiter,
            on_limit,
            named_by_default: false,
            dry_run: false,
            refunds: SiteRefunds::new(),
            prefetch: SitePrefetch::off(),
        }
    }

    /// Puts the site in dry run (`dry_run = true`): its calls are decided
    /// and recorded, and one that would be denied runs the body anyway
    /// ([`Limiter::with_dry_run`](crate::Limiter::with_dry_run)).
    pub const fn dry_run(mut self) -> Site {
        self.dry_run = true;
        self
    }

    /// Takes up to `k` permits per store call for a hot key (`prefetch = k`,
    /// [`Limiter::with_prefetch`](crate::Limiter::with_prefetch)); ignored
    /// under a named or per-call policy of an algorithm that cannot prefetch.
    pub const fn prefetch(mut self, k: u64) -> Site {
        self.prefetch.max = k;
        self
    }

    /// Marks the name as made up by the macro (module path + function name).
    /// Methods of two types in one module get the same such name and so
    /// share a limit; the first call of the second one warns about it.
    pub const fn named_by_default(mut self) -> Site {
        self.named_by_default = true;
        self
    }

    /// Decides one call: `Ok(permit)` runs the body, which holds the permit
    /// until it ends (a concurrency policy's is given back then; a rate
    /// policy's was spent and holds nothing); `Err` is the denial to
    /// return (or to call the fallback with). Under `OnLimit::Wait` it
    /// sleeps until the call passes or the maximum wait would be exceeded.
    /// When the global store cannot be built, or a named policy is not
    /// configured, the site's `on_error` decides (never a panic).
    ///
    /// The denial is boxed: every call moves this `Result`, and a box is one word.
    pub async fn check(&'static self, key: &[u8], cost: u64) -> Result<Holding, Box<RateLimited>> {
        self.decide(None, key, cost).await
    }

    /// [`check`](Self::check) deciding by `policy`, the one this call gives
    /// (a [`per_call`](Self::per_call) site). The site's limiter is built
    /// once, from the first call's policy; every call then decides by its
    /// own through [`Limiter::with_policy`](crate::Limiter::with_policy),
    /// so a key's count carries over when its policy changes (same algorithm).
    pub async fn check_with(
        &'static self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
    ) -> Result<Holding, Box<RateLimited>> {
        self.decide(Some(policy), key, cost).await
    }

    async fn decide(
        &'static self,
        policy: Option<&Policy>,
        key: &[u8],
        cost: u64,
    ) -> Result<Holding, Box<RateLimited>> {
        self.decide_by(policy, key, cost).await.map(|(permit, _)| permit)
    }

    /// [`decide`](Self::decide), and the call a refund would give back to,
    /// when the store took its permits.
    async fn decide_by(
        &'static self,
        policy: Option<&Policy>,
        key: &[u8],
        cost: u64,
    ) -> Result<(Holding, Option<Refunded>), Box<RateLimited>> {
        // Boxed: only a call that builds or looks up the limiter waits for it.
        let current = match self.limiter.ready(policy) {
            Some(ready) => ready,
            None => Box::pin(self.limiter.current_ref(policy)).await,
        };
        let limiter = match current {
            Ok((limiter, first)) => {
                if first && self.named_by_default {
                    self.warn_if_default_name_shared();
                }
                // Owned only when the site changes it: most calls borrow it.
                match (self.dry_run, self.prefetch.is_on()) {
                    (false, false) => limiter,
                    _ => Cow::Owned(limiter.into_owned().with_dry_run(self.dry_run).with_site_prefetch(&self.prefetch)),
                }
            }
            Err(why) => {
                // Settled without I/O: spend the task's budget as I/O would, so a loop of such calls yields.
                tokio::task::coop::consume_budget().await;
                return self
                    .limiter
                    .settle_unconfigured("call", self.name, &why, key)
                    .map(|()| (Holding::default(), None))
                    .map_err(|denied| self.denial(denied));
            }
        };
        // What a refund of this call names; the HTTP layer's headers are
        // made from the decision this call records.
        let admitted = OnceLock::new();
        let seen = |decision: &crate::Decision| {
            let _ = admitted.set(Refunded::of(decision));
            #[cfg(feature = "axum")]
            crate::http::record_decision(&limiter, decision);
        };
        let decided = match self.on_limit {
            OnLimit::Error => limiter.acquire_holding(key, cost, None, seen).await,
            // Boxed: a waiting call sleeps anyway, and its state would otherwise size every call's future.
            OnLimit::Wait(max) => Box::pin(limiter.acquire_holding(key, cost, Some(max), seen)).await,
        };
        match decided {
            Ok((holding, taken)) => Ok((holding, admitted.get().copied().filter(|_| taken))),
            Err(denied) => Err(self.denial(denied)),
        }
    }

    /// A denial of this site's, boxed; a name the macro made up is marked,
    /// so a client is not shown the module path.
    pub(crate) fn denial(&self, denied: RateLimited) -> Box<RateLimited> {
        Box::new(if self.named_by_default { denied.named_by_default() } else { denied })
    }

    /// [`check`](Self::check) for a function that has no way to return a
    /// denial: `on_limit = "wait"` with no maximum, a literal cost the
    /// policy admits and `on_error` other than `"deny"`. The macro only
    /// emits it when those hold, so every denial is waited out; should one
    /// still come back, the call goes ahead (fail open) with a warning.
    pub async fn admit(&'static self, key: &[u8], cost: u64) -> Holding {
        self.admit_result(self.check(key, cost).await)
    }

    /// [`admit`](Self::admit) deciding by this call's `policy`. Emitted only
    /// for a cost of 0 or 1, which every policy admits once waited for.
    pub async fn admit_with(&'static self, policy: &Policy, key: &[u8], cost: u64) -> Holding {
        self.admit_result(self.check_with(policy, key, cost).await)
    }

    fn admit_result(&self, decided: Result<Holding, Box<RateLimited>>) -> Holding {
        decided.unwrap_or_else(|denied| {
            tracing::warn!(target: "redlimit", limiter = self.name, %denied, "denial could not be waited out; call allowed");
            Holding::default()
        })
    }

    /// [`check`](Self::check) for `refund_on = "err"`: what the call took,
    /// to give back if its body fails.
    pub async fn take(&'static self, key: impl Into<Cow<'static, str>>, cost: u64) -> Result<Taken, Box<RateLimited>> {
        let key = key.into();
        let (permit, taken) = self.decide_by(None, key.as_bytes(), cost).await?;
        Ok(Taken::new(self, (permit, taken), key, cost, None))
    }

    /// [`take`](Self::take) deciding by this call's `policy` ([`check_with`](Self::check_with)).
    pub async fn take_with(
        &'static self,
        policy: &Policy,
        key: impl Into<Cow<'static, str>>,
        cost: u64,
    ) -> Result<Taken, Box<RateLimited>> {
        let key = key.into();
        let taken = self.decide_by(Some(policy), key.as_bytes(), cost).await?;
        Ok(Taken::new(self, taken, key, cost, Some(policy)))
    }

    /// [`admit`](Self::admit) for `refund_on = "err"`: a denial let through took nothing.
    pub async fn admit_taking(&'static self, key: impl Into<Cow<'static, str>>, cost: u64) -> Taken {
        let key = key.into();
        let taken = self.admit_taken(self.decide_by(None, key.as_bytes(), cost).await);
        Taken::new(self, taken, key, cost, None)
    }

    /// [`admit_taking`](Self::admit_taking) deciding by this call's `policy`.
    pub async fn admit_taking_with(
        &'static self,
        policy: &Policy,
        key: impl Into<Cow<'static, str>>,
        cost: u64,
    ) -> Taken {
        let key = key.into();
        let taken = self.admit_taken(self.decide_by(Some(policy), key.as_bytes(), cost).await);
        Taken::new(self, taken, key, cost, Some(policy))
    }

    fn admit_taken(
        &self,
        decided: Result<(Holding, Option<Refunded>), Box<RateLimited>>,
    ) -> (Holding, Option<Refunded>) {
        match decided {
            Ok(taken) => taken,
            Err(denied) => (self.admit_result(Err(denied)), None),
        }
    }

    /// Gives `cost` back to `key`, of the call `of` describes, under the
    /// call's `policy` when it gave one; a failure is logged (`refund.rs`),
    /// never returned.
    async fn refund(&'static self, policy: Option<&Policy>, key: &str, cost: u64, of: Refunded) {
        // Built already: the call that took the permits built it.
        if let Ok((limiter, _)) = self.limiter.current(policy).await {
            self.refunds.refund(self.name, &limiter, key, cost, of).await;
        }
    }

    /// Warns once per site when another site already uses the same default name.
    fn warn_if_default_name_shared(&'static self) {
        static DEFAULT_NAMES: Mutex<Vec<(&'static str, usize)>> = Mutex::new(Vec::new());
        let (name, address) = (self.name, self as *const Site as usize);
        let mut names = DEFAULT_NAMES.lock().unwrap_or_else(PoisonError::into_inner);
        if names.iter().any(|&(other_name, other)| other_name == name && other != address) {
            tracing::warn!(
                target: "redlimit",
                limiter = name,
                "two #[rate_limit] functions have the default name `{name}` (methods of two types in one module?), so they share one limit; give each a `name = \"...\"` if that is not intended",
            );
        }
        if !names.contains(&(name, address)) {
            names.push((name, address));
        }
    }
}

/// What a call of a `refund_on = "err"` site took, to give back when its
/// body returns `Err(..)`, and the permit its body holds. Made by
/// [`Site::take`] and its kin.
#[derive(Debug)]
pub struct Taken {
    /// `None`: nothing to give back (the call took nothing from the store:
    /// cost 0, or settled by `on_error`).
    owed: Option<Owed>,
    _holding: Holding,
}

#[derive(Debug)]
struct Owed {
    site: &'static Site,
    key: Cow<'static, str>,
    cost: u64,
    /// The call whose permits these are.
    of: Refunded,
    /// The call's own policy, for a site whose calls give one.
    policy: Option<Policy>,
}

impl Taken {
    fn new(
        site: &'static Site,
        (holding, taken): (Holding, Option<Refunded>),
        key: Cow<'static, str>,
        cost: u64,
        policy: Option<&Policy>,
    ) -> Taken {
        let owed = taken.filter(|_| cost > 0).map(|of| Owed { site, key, cost, of, policy: policy.cloned() });
        Taken { owed, _holding: holding }
    }

    /// Gives the permits back when `failed`: the body returned `Err(..)`.
    pub async fn refund_if(self, failed: bool) {
        if failed {
            self.refund().await;
        }
    }

    /// Gives the permits back: the body did not run (a later attribute
    /// denied the call).
    pub async fn refund(self) {
        if let Some(Owed { site, key, cost, of, policy }) = self.owed {
            site.refund(policy.as_ref(), &key, cost, of).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DenialReason, ManualClock, Store};
    use std::sync::Once;

    /// The global store these sites are built on: memory, a clock that stands still.
    fn on_memory() {
        static INIT: Once = Once::new();
        INIT.call_once(|| crate::init(Store::memory().with_clock(ManualClock::new())).unwrap());
    }

    #[tokio::test]
    async fn each_call_is_decided_by_its_own_policy_and_a_key_keeps_its_count_across_policies() {
        on_memory();
        static SITE: Site = Site::per_call("site.per_call", OnLimit::Error, OnError::Allow);
        let (two, five) = (Policy::fixed_window("2/1m").unwrap(), Policy::fixed_window("5/1m").unwrap());

        SITE.check_with(&two, b"ann", 2).await.unwrap();
        let denied = SITE.check_with(&two, b"ann", 1).await.unwrap_err();
        assert_eq!((denied.decision().limit, denied.policy()), (2, Some(&two)));
        // Not the policy the limiter was built from: bob's own.
        SITE.check_with(&five, b"bob", 5).await.unwrap();
        // Ann moves to five: her 2 still count, so 3 are left.
        SITE.check_with(&five, b"ann", 3).await.unwrap();
        let denied = SITE.check_with(&five, b"ann", 1).await.unwrap_err();
        assert_eq!((denied.decision().limit, denied.decision().remaining), (5, 0));
    }

    #[tokio::test]
    async fn admit_with_lets_a_denial_through_and_counts_nothing_for_it() {
        on_memory();
        static SITE: Site = Site::per_call("site.admit", OnLimit::Error, OnError::Allow);
        let one = Policy::fixed_window("1/1m").unwrap();
        SITE.admit_with(&one, b"k", 1).await;
        SITE.admit_with(&one, b"k", 1).await; // denied, let through with a warning
        let three = Policy::fixed_window("3/1m").unwrap();
        SITE.check_with(&three, b"k", 2).await.unwrap();
        assert_eq!(SITE.check_with(&three, b"k", 1).await.unwrap_err().decision().remaining, 0);
    }

    #[tokio::test]
    async fn a_per_call_site_asked_without_a_policy_is_settled_by_on_error() {
        on_memory();
        static OPEN: Site = Site::per_call("site.open", OnLimit::Error, OnError::Allow);
        static CLOSED: Site = Site::per_call("site.closed", OnLimit::Error, OnError::Deny);
        assert!(OPEN.check(b"k", 1).await.is_ok());
        assert_eq!(CLOSED.check(b"k", 1).await.unwrap_err().reason(), DenialReason::PolicyNotConfigured);
    }
}
