//! Enforcement: what a caller sees of a decision. [`Enforcement`] is the
//! one settings type for it (what a denial does, what a store failure does,
//! dry run, refunds), which limiters, annotated functions and layers keep
//! alike; [`Limiter::enforce`] is the one place that applies it to a
//! decision. `check` and `peek` only report; [`Limiter::limit`] and
//! [`Limiter::wait`] enforce.

use crate::call::{Call, CallKind};
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::on_error::OnError;
use crate::rate_limited::RateLimited;
use crate::Limiter;
use std::time::Duration;

/// What a denied call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLimit {
    /// Return `Err(RateLimited.into())` (or call the fallback: decided by the generated code).
    Error,
    /// Sleep until `retry_after` and try again, for at most this long in total (`None`: unbounded).
    Wait(Option<Duration>),
}

/// How a limiter's denials and store failures reach its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Enforcement {
    /// What an admitting call ([`Limiter::admit`]) does with a denial.
    pub(crate) on_limit: OnLimit,
    /// What a call does when the store cannot answer.
    pub(crate) on_error: OnError,
    /// Decided and recorded, never denied: a trial ([`Limiter::with_dry_run`]).
    pub(crate) dry_run: bool,
    /// An admitted call keeps what it took, to give back (`refund_on`).
    pub(crate) refunds: bool,
}

impl Enforcement {
    /// A denial is an error, a store failure lets the call through, nothing is kept.
    pub(crate) const DEFAULT: Enforcement =
        Enforcement { on_limit: OnLimit::Error, on_error: OnError::Allow, dry_run: false, refunds: false };
}

impl Limiter {
    /// Like [`check`](Self::check), but a denial is an `Err(RateLimited)` and a
    /// store failure is settled by the limiter's [`OnError`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("search", Policy::gcra("1/1s", 0)?, &store);
    /// assert!(limiter.limit("carol", 1).await.is_ok());
    /// let denied = limiter.limit("carol", 1).await.unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(std::time::Duration::from_secs(1)));
    /// # Ok(()) }
    /// ```
    pub async fn limit(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<Decision, RateLimited> {
        let call = Call::check(key.as_ref(), cost);
        self.enforce(call, self.decide(call.key, cost, CallKind::Check).await).map(|(decision, _)| decision)
    }

    /// Like [`limit`](Self::limit), but a denial that can pass later sleeps
    /// until `retry_after` and tries again, for at most `max_wait` in total
    /// (`None`: no bound). This is how a leaky bucket shapes traffic.
    pub async fn wait(
        &self,
        key: impl AsRef<[u8]>,
        cost: u64,
        max_wait: Option<Duration>,
    ) -> Result<Decision, RateLimited> {
        self.wait_taken(Call::check(key.as_ref(), cost), max_wait).await.map(|(decision, _)| decision)
    }

    /// [`wait`](Self::wait), and whether the store took the permits ([`enforce`](Self::enforce)).
    pub(crate) async fn wait_taken(
        &self,
        call: Call<'_>,
        max_wait: Option<Duration>,
    ) -> Result<(Decision, bool), RateLimited> {
        let mut waited = Duration::ZERO;
        loop {
            // The check awaited here and the denial dropped before the sleep:
            // the future holds one or the other, never both.
            let wait = match self.enforce(call, self.decide(call.key, call.cost, CallKind::Check).await) {
                Err(denied) => match denied.retry_after() {
                    Some(wait) if max_wait.is_none_or(|max| waited + wait <= max) => wait,
                    _ => return Err(denied),
                },
                allowed => return allowed,
            };
            tokio::time::sleep(wait).await;
            waited += wait;
        }
    }

    /// What a caller sees of `call`'s decision: a denial becomes `Err`
    /// (unless in dry run, which lets it through), a store failure is
    /// settled by `on_error`; with whether the store took the permits
    /// (not `on_error`, which takes none from it, nor a dry run letting a
    /// denied call through): what a refund may give back.
    #[inline]
    pub(crate) fn enforce(
        &self,
        call: Call<'_>,
        decided: Result<Decision, Error>,
    ) -> Result<(Decision, bool), RateLimited> {
        let (decision, by_store) = match decided {
            Ok(decision) => (decision, true),
            // A call made wrongly, not a failure: no `on_error` or dry run lets it through.
            Err(Error::Misuse(why)) => return Err(self.misused(call.key, why)),
            Err(error) => match self.enforcement.on_error.settle(self, call, &error) {
                Err(denied) if self.is_dry_run() => {
                    crate::limiter::dry_run::would_have_denied(self);
                    return Ok((denied.decision().clone(), false));
                }
                settled => (settled?, false),
            },
        };
        if decision.allowed {
            Ok((decision, by_store))
        } else if self.is_dry_run() {
            crate::limiter::dry_run::would_have_denied(self);
            Ok((decision, false))
        } else {
            Err(self.denial(call.key, decision, false))
        }
    }

    /// A call made wrongly ([`Error::Misuse`]), saying why: denied, never let through.
    #[cold]
    pub(crate) fn misused(&self, key: &[u8], why: String) -> RateLimited {
        if !self.inner.misuse_reported.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(target: "redlimit", limiter = &*self.inner.name, "a call was refused, and others like it will be: {why}");
        }
        let decided_at = std::time::SystemTime::now();
        let decision = crate::limiter::on_error::unsettled(false, self.rule.policy.max_cost(), decided_at);
        RateLimited::misused(self.inner.name.clone(), key, self.rule.policy.clone(), decision, why)
    }

    /// A denial of `key` by this limiter: by its limit, or, when
    /// `store_unavailable`, by `on_error = "deny"`.
    pub(crate) fn denial(&self, key: &[u8], decision: Decision, store_unavailable: bool) -> RateLimited {
        let (name, policy) = (self.inner.name.clone(), self.rule.policy.clone());
        match store_unavailable {
            true => RateLimited::store_unavailable(name, key, policy, decision),
            false => RateLimited::limited(name, key, policy, decision),
        }
    }
}
