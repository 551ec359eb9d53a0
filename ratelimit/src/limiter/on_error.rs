//! [`OnError`]: what a call does when the store cannot answer, and the one
//! place that does it.

use crate::call::Call;
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::outage_log::{rounded, OutageLog, Recovery, Report, LOG_INTERVAL};
use crate::observe::error_kind;
use crate::rate_limited::RateLimited;
use crate::Limiter;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What [`Limiter::limit`](crate::Limiter::limit) (and every annotated
/// function) does when the store times out or cannot be reached.
///
/// ```
/// use redlimit::{Limiter, OnError, Policy, Store};
///
/// assert_eq!(OnError::default(), OnError::Allow);
/// let limiter = Limiter::new("api", Policy::gcra("1/1s", 0)?, &Store::memory()).with_on_error(OnError::Deny);
/// assert_eq!(limiter.store_errors(), 0, "the memory store always answers");
/// # Ok::<(), redlimit::Error>(())
/// ```
///
/// Whatever the choice, the failure is counted
/// ([`Limiter::store_errors`](crate::Limiter::store_errors)) and logged, per
/// limiter: its first failure at WARN at once, then at most one WARN every
/// 10 s with the number of calls settled meanwhile, and an INFO line once
/// the store answers again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Let the call through (fail open), as Envoy and most peers do.
    #[default]
    Allow,
    /// Deny the call; the denial says the store was unavailable.
    Deny,
    /// Decide on an in-process limiter with the same policy until the store
    /// answers again.
    Local,
}

impl OnError {
    fn name(self) -> &'static str {
        match self {
            OnError::Allow => "allow",
            OnError::Deny => "deny",
            OnError::Local => "local",
        }
    }

    /// Settles a call `limiter` could not decide; a timed-out call may have
    /// been counted by the store, so it is never treated as a permit taken.
    pub(crate) fn settle(self, limiter: &Limiter, call: Call<'_>, error: &Error) -> Result<Decision, RateLimited> {
        let inner = &limiter.inner;
        inner.store_errors.fetch_add(1, Ordering::Relaxed);
        let now_us = inner.store.clock.now_us();
        let decision = match self {
            OnError::Allow | OnError::Deny => {
                let decided_at = UNIX_EPOCH
                    + Duration::from_micros(now_us.map_or_else(crate::clock::system_now_us, crate::clock::bounded));
                unsettled(self == OnError::Allow, limiter.rule.policy.max_cost(), decided_at)
            }
            OnError::Local => limiter.decide_locally(call),
        };
        if let Some(report) = inner.outage.failed(now_us.unwrap_or_else(crate::clock::process_now_us)) {
            self.report(limiter, report, decision.allowed, error);
        }
        limiter.metrics().decided(decision.allowed, !decision.allowed && limiter.is_dry_run());
        match self {
            OnError::Deny => Err(limiter.denial(call.key, decision, true)),
            _ => Ok(decision),
        }
    }

    /// Logs a store failure of `limiter` that [`OutageLog`] says is due.
    fn report(self, limiter: &Limiter, report: Report, allowed: bool, error: &Error) {
        let (limiter, kind, on_error) = (&*limiter.inner.name, error_kind(error), self.name());
        match report {
            Report::First { earlier } => {
                let verdict = if allowed { "call allowed" } else { "call denied" };
                let by = if self == OnError::Local { " by the in-memory limiter" } else { "" };
                let earlier = match earlier {
                    0 => String::new(),
                    n => format!("; {n} calls settled since the last line"),
                };
                tracing::warn!(target: "redlimit", limiter, kind, %error,
                    "rate limit store unavailable; {verdict}{by} (on_error = {on_error}){earlier}; \
                     further failures are summed up every {LOG_INTERVAL:?}");
            }
            Report::Ongoing { failures, over } => {
                tracing::warn!(target: "redlimit", limiter, kind, %error,
                    "rate limit store still unavailable: {failures} calls settled by on_error = {on_error} in the last {:?}",
                    rounded(over));
            }
        }
    }

    /// Logs, once, that `limiter`'s store answers again after a reported outage.
    #[inline]
    pub(crate) fn answered(self, limiter: &Limiter) {
        let inner = &limiter.inner;
        let clock = &inner.store.clock;
        if let Some(Recovery { lasted, failures }) =
            inner.outage.answered(|| clock.now_us().unwrap_or_else(crate::clock::process_now_us))
        {
            tracing::info!(target: "redlimit", limiter = &*inner.name,
                "rate limit store answers again after {:?}; {failures} calls were settled by on_error = {}",
                rounded(lasted), self.name());
        }
    }

    /// Settles a call whose named policy is not configured, as a store
    /// failure would be: `Deny` denies it, and `Allow` and `Local` (which has
    /// no policy to apply in memory) let it through uncounted. `subject`
    /// names the call in the log line (`"call"`, `"request"`); `log` keeps
    /// that line to one per interval, as for an outage.
    pub(crate) fn without_policy(
        self,
        subject: &str,
        (limiter, policy): (&str, &str),
        why: &str,
        key: &[u8],
        log: &OutageLog,
    ) -> Result<(), RateLimited> {
        let verdict = if self == OnError::Deny { "denied" } else { "allowed" };
        match log.failed(crate::clock::process_now_us()) {
            Some(Report::First { .. }) => tracing::warn!(target: "redlimit", limiter, policy,
                "{why}; {subject} {verdict} (on_error = {})", self.name()),
            Some(Report::Ongoing { failures, over }) => tracing::warn!(target: "redlimit", limiter, policy,
                "{why}; {failures} {subject}s {verdict} (on_error = {}) in the last {:?}", self.name(), rounded(over)),
            None => {}
        }
        if self != OnError::Deny {
            return Ok(());
        }
        Err(RateLimited::policy_not_configured(limiter.into(), key, unsettled(false, 0, SystemTime::now())))
    }
}

/// The decision of a call no store decided.
pub(crate) fn unsettled(allowed: bool, limit: u64, decided_at: SystemTime) -> Decision {
    Decision {
        allowed,
        limit,
        remaining: 0,
        reset_after: Duration::ZERO,
        retry_after: None,
        violated: Vec::new(),
        decided_at,
        quotas: Vec::new(),
    }
}
