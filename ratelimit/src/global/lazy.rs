//! [`LazyLimiter`]: a limiter built on first use on the global store, with a
//! policy written in code, a named one from the configured set, or one given
//! with each call. Annotated functions and `RateLimitLayer`s decide through one.

use crate::config::named::NamedLimiter;
use crate::global::{self, scope};
use crate::limiter::enforcement::Enforcement;
use crate::limiter::on_error::OnError;
use crate::limiter::outage_log::OutageLog;
use crate::limiter::Limiter;
use crate::policy::Policy;
use crate::prefetch::SitePrefetch;
use crate::rate_limited::RateLimited;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A limiter that does not exist until its first call.
#[derive(Debug)]
pub(crate) struct LazyLimiter {
    name: Cow<'static, str>,
    /// What every limiter it gives enforces (an annotated function's or a layer's settings).
    pub(crate) enforcement: Enforcement,
    /// The quotas every limiter it gives spends (an annotated function's `prefetch = k`).
    pub(crate) prefetch: SitePrefetch,
    source: PolicySource,
    /// Calls settled because the named policy is not configured: logged as an outage is.
    unconfigured: OutageLog,
}

// One per site or layer, read on every call: boxing the larger variant
// would add an indirection to each call to save bytes held once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum PolicySource {
    /// Written in code (for the attribute: validated at compile time), or
    /// `None` when each call brings its own: the limiter is then built from
    /// the first call's, since every call decides by its own anyway.
    Fixed {
        policy: Option<Policy>,
        /// Built once, asynchronously: connecting to the global store is a round trip.
        built: tokio::sync::OnceCell<Limiter>,
        /// Decides, under `on_error`, while the global store cannot be built
        /// (and keeps the in-memory state of `OnError::Local` between calls).
        degraded: once_cell::sync::OnceCell<Limiter>,
    },
    /// Looked up in [`crate::policies`], followed across reloads.
    Named(NamedLimiter),
}

/// `limiter` deciding by the call's own policy, when it gives one.
fn apply<'a>(limiter: Cow<'a, Limiter>, per_call: Option<&Policy>) -> Cow<'a, Limiter> {
    match per_call {
        Some(policy) => Cow::Owned(limiter.with_policy(policy)),
        None => limiter,
    }
}

/// The limiter deciding a call now, and whether this call built it.
pub(crate) type Current = (Limiter, bool);

/// [`Current`], lent when it can be.
pub(crate) type CurrentRef<'a> = (Cow<'a, Limiter>, bool);

impl LazyLimiter {
    /// A limiter of `policy`.
    pub(crate) const fn fixed(name: Cow<'static, str>, policy: Policy, enforcement: Enforcement) -> LazyLimiter {
        LazyLimiter::built_from(name, Some(policy), enforcement)
    }

    /// A limiter whose every call gives its policy ([`current_ref`](Self::current_ref)'s `per_call`).
    pub(crate) const fn per_call(name: Cow<'static, str>, enforcement: Enforcement) -> LazyLimiter {
        LazyLimiter::built_from(name, None, enforcement)
    }

    const fn built_from(name: Cow<'static, str>, policy: Option<Policy>, enforcement: Enforcement) -> LazyLimiter {
        let source = PolicySource::Fixed {
            policy,
            built: tokio::sync::OnceCell::const_new(),
            degraded: once_cell::sync::OnceCell::new(),
        };
        LazyLimiter { name, enforcement, prefetch: SitePrefetch::off(), source, unconfigured: OutageLog::new() }
    }

    /// A limiter of the configured policy named `policy`.
    pub(crate) const fn named(
        name: Cow<'static, str>,
        policy: Cow<'static, str>,
        enforcement: Enforcement,
    ) -> LazyLimiter {
        let source = PolicySource::Named(NamedLimiter::new(policy, enforcement.on_error));
        LazyLimiter { name, enforcement, prefetch: SitePrefetch::off(), source, unconfigured: OutageLog::new() }
    }

    /// `limiter` made this one's: its enforcement and its quotas.
    fn finish(&self, limiter: Limiter) -> Limiter {
        limiter.enforcing(self.enforcement).with_site_prefetch(&self.prefetch)
    }

    /// The limiter's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The configured policy's name, for a named limiter.
    fn policy_name(&self) -> Option<&str> {
        match &self.source {
            PolicySource::Named(named) => Some(named.policy()),
            PolicySource::Fixed { .. } => None,
        }
    }

    /// Settles a call that [`current_ref`](Self::current_ref) found no
    /// policy for (`why`) by `on_error`; `subject` names the call in the log.
    pub(crate) fn settle_unconfigured(
        &self,
        on_error: OnError,
        subject: &str,
        why: &str,
        key: &[u8],
    ) -> Result<(), RateLimited> {
        let policy = self.policy_name().unwrap_or_default();
        on_error.without_policy(subject, (&self.name, policy), why, key, &self.unconfigured)
    }

    /// The limiter for this call, deciding by `per_call` when given, and
    /// whether this call built it; `Err` with why, when a named policy is
    /// not configured or no policy is known. A fixed policy's limiter once
    /// built, outside a scope, is lent, not cloned.
    pub(crate) async fn current_ref(&self, per_call: Option<&Policy>) -> Result<CurrentRef<'_>, Arc<str>> {
        if let Some(ready) = self.ready(per_call) {
            return ready;
        }
        match &self.source {
            PolicySource::Fixed { policy, built, degraded } => {
                let Some(policy) = policy.as_ref().or(per_call) else {
                    return Err("no policy was given for this call".into());
                };
                // Boxed behind `dyn`: building the store is a deep future
                // that would otherwise size every call's.
                let build: Pin<Box<dyn Future<Output = Current> + Send + '_>> =
                    Box::pin(self.build_fixed(policy, built, degraded));
                let (limiter, first) = build.await;
                Ok((apply(Cow::Owned(limiter), per_call), first))
            }
            PolicySource::Named(named) => {
                let (configured, first) = Box::pin(named.current(&self.name)).await;
                let limiter = configured.limiter.as_ref().map_err(Arc::clone)?;
                Ok((apply(Cow::Owned(self.finish(limiter.clone())), per_call), first))
            }
        }
    }

    /// [`current_ref`](Self::current_ref) when it need not wait (in a
    /// scope, a fixed policy's limiter already built, a named policy's
    /// current one), so the common call awaits nothing for it; `None` when
    /// the limiter is still to be built or looked up.
    pub(crate) fn ready(&self, per_call: Option<&Policy>) -> Option<Result<CurrentRef<'_>, Arc<str>>> {
        if let Some(scoped) = self.scoped(per_call) {
            return Some(scoped.map(|limiter| (Cow::Owned(self.finish(limiter)), false)));
        }
        match &self.source {
            PolicySource::Fixed { built, .. } => {
                built.get().map(|limiter| Ok((apply(Cow::Borrowed(limiter), per_call), false)))
            }
            PolicySource::Named(named) => named.cached().map(|configured| {
                let limiter = configured.limiter.as_ref().map_err(Arc::clone)?;
                Ok((apply(Cow::Owned(self.finish(limiter.clone())), per_call), false))
            }),
        }
    }

    /// A fixed policy's limiter, once built, when no scope may hold another:
    /// what a site lends its calls, with nothing to look up or own.
    #[inline]
    pub(crate) fn built(&self) -> Option<&Limiter> {
        match &self.source {
            PolicySource::Fixed { policy: Some(_), built, .. } if !scope::may_be_inside() => built.get(),
            _ => None,
        }
    }

    /// Inside a [`scope`]: the limiter on the scope's store,
    /// deciding by this call's policy.
    fn scoped(&self, per_call: Option<&Policy>) -> Option<Result<Limiter, Arc<str>>> {
        if !scope::may_be_inside() {
            return None;
        }
        let configured;
        let policy = match (&self.source, per_call) {
            (_, Some(policy)) => Ok(policy),
            (PolicySource::Fixed { policy: Some(policy), .. }, None) => Ok(policy),
            (PolicySource::Fixed { policy: None, .. }, None) => Err("no policy was given for this call".into()),
            (PolicySource::Named(named), None) => {
                configured = named.configured_policy();
                configured.as_ref().map_err(Arc::clone)
            }
        };
        scope::limiter(&self.name, policy, self.enforcement.on_error)
    }

    /// Builds a fixed policy's limiter on the global store, or, while that
    /// cannot be built, gives the degraded one.
    ///
    /// The store is asked for outside the cell's initialization, so calls
    /// wait for it side by side (each within the bound `runtime::global`
    /// keeps), not one after another.
    async fn build_fixed(
        &self,
        policy: &Policy,
        built: &tokio::sync::OnceCell<Limiter>,
        degraded: &once_cell::sync::OnceCell<Limiter>,
    ) -> Current {
        match global::global().await {
            Ok(store) => {
                let mut first = false;
                let limiter = built.get_or_init(|| {
                    first = true;
                    std::future::ready(self.finish(Limiter::new(self.name.as_ref(), policy.clone(), store)))
                });
                (limiter.await.clone(), first)
            }
            // Every call fails as unavailable, so `on_error` settles it as any store failure.
            Err(error) => {
                let unavailable =
                    || self.finish(Limiter::unavailable(&self.name, policy, error, self.enforcement.on_error));
                (degraded.get_or_init(unavailable).clone(), false)
            }
        }
    }
}
