//! Enforcement: [`Limiter::limit`] and [`Limiter::wait`] turn a denial into
//! [`RateLimited`] and settle a store failure by the limiter's `OnError`;
//! `check` and `peek` only report.

use crate::backend::CallKind;
use crate::{Decision, Error, Limiter, RateLimited};
use std::time::Duration;

impl Limiter {
    /// Like [`check`](Self::check), but a denial is an `Err(RateLimited)` and a
    /// store failure is settled by the limiter's [`OnError`](crate::OnError).
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
        self.limit_by(key.as_ref(), cost).await.map(|(decision, _)| decision)
    }

    /// [`limit`](Self::limit), and whether the store took the permits (not
    /// `on_error`, which takes none from it, nor a dry run letting a denied
    /// call through): what a refund may give back.
    pub(crate) async fn limit_by(&self, key: &[u8], cost: u64) -> Result<(Decision, bool), RateLimited> {
        let decided = self.decide(key, cost, CallKind::Check).await;
        self.enforce(key, cost, decided)
    }

    /// What [`limit_by`](Self::limit_by) makes of a check's result: a
    /// denial becomes `Err` (unless in dry run), a store failure is settled
    /// by `on_error`. Apart from the call, so an entry point that awaits the
    /// check itself (`acquire_by`) adds no future around it.
    #[allow(clippy::result_large_err)] // the Result of `Limiter::limit`, which returns it as is
    #[inline]
    pub(crate) fn enforce(
        &self,
        key: &[u8],
        cost: u64,
        decided: Result<Decision, Error>,
    ) -> Result<(Decision, bool), RateLimited> {
        let (decision, by_store) = match decided {
            Ok(decision) => (decision, true),
            Err(error) => match self.on_error.settle(self, key, cost, CallKind::Check, &error) {
                Err(denied) if self.is_dry_run() => {
                    crate::dry_run::would_have_denied(self);
                    return Ok((denied.decision().clone(), false));
                }
                settled => (settled?, false),
            },
        };
        if decision.allowed {
            Ok((decision, by_store))
        } else if self.is_dry_run() {
            crate::dry_run::would_have_denied(self);
            Ok((decision, false))
        } else {
            Err(self.denial(key, decision, false))
        }
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
        self.wait_by(key.as_ref(), cost, max_wait).await.map(|(decision, _)| decision)
    }

    /// [`wait`](Self::wait), and whether the store took the permits ([`limit_by`](Self::limit_by)).
    pub(crate) async fn wait_by(
        &self,
        key: &[u8],
        cost: u64,
        max_wait: Option<Duration>,
    ) -> Result<(Decision, bool), RateLimited> {
        let mut waited = Duration::ZERO;
        loop {
            // The check awaited here and the denial dropped before the sleep:
            // the future holds one or the other, never both.
            let wait = match self.enforce(key, cost, self.decide(key, cost, CallKind::Check).await) {
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
