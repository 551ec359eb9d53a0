//! Refunds: [`Limiter::refund`] gives permits back when the work they paid
//! for did not happen; [`RefundLog`] makes an admitted call's (a permit's
//! [`Ticket`](crate::permit::Ticket), for `refund_on`) and logs those that fail. A refund is not a
//! decision: no metric counts it as one, the deny cache neither answers nor
//! remembers it, and it only forgets the key's remembered denials, since
//! permits came back.

use crate::call::{CallKind, Refunded};
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::outage_log::{rounded, OutageLog, Report, LOG_INTERVAL};
use crate::{algo, observe, Limiter};
use redlimit_grammar::AlgorithmKind;
use std::sync::atomic::{AtomicBool, Ordering};

impl Limiter {
    /// Gives up to `n` permits back to `key`, of the call that `of` (its
    /// admitted decision, on this key) answered, for work they paid for that
    /// did not happen (a handler that failed, a request the upstream
    /// rejected), and returns the key's state after it, as
    /// [`peek`](Self::peek) of cost 0 would report it.
    ///
    /// A refund names the call it is for, so a late one gives back only what
    /// that call still holds, never more than was taken in what still
    /// counts; it never admits more than the policy allows:
    ///
    /// | algorithm | a refund of `n` |
    /// |---|---|
    /// | `token_bucket` | puts `n` tokens back, never above full |
    /// | `leaky_bucket` | lowers the level by `n`, never below empty |
    /// | `gcra` | moves the theoretical arrival time back by `n` emission intervals, never before now |
    /// | `fixed_window` | lowers by `n`, never below zero, the count of each window that counted the refunded call and still runs; a window that ended, or began after that call's ended, gives nothing back (on Redis's clock, a policy of one strategy also gives nothing in the last 2 ms of the call's window, which Redis times to the ms) |
    /// | `sliding_window`, `sliding_log` | `Err(Error::InvalidConfig)`: their state records when permits were taken, and a refund cannot say which call it is for nor whether that call still counts |
    ///
    /// An untouched key has nothing to give back: its state stays as it is.
    /// `Err` is a refund the store could not make (it may or may not have
    /// been made, after a timeout); [`OnError`](crate::OnError) does not
    /// apply to it. It is never sent twice.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("uploads", Policy::token_bucket(3, "1/1m")?, &store);
    /// let upload = limiter.check("alice", 3).await?;
    /// assert!(!limiter.check("alice", 1).await?.allowed);
    ///
    /// // The upload failed upstream: its permits come back, never above full.
    /// let after = limiter.refund("alice", 5, &upload).await?;
    /// assert_eq!((after.allowed, after.remaining), (true, 3));
    /// assert_eq!(limiter.check("alice", 1).await?.remaining, 2);
    ///
    /// let log = Limiter::new("logins", Policy::sliding_log("3/1m")?, &store);
    /// let login = log.check("alice", 1).await?;
    /// assert!(matches!(log.refund("alice", 1, &login).await, Err(redlimit::Error::InvalidConfig(_))));
    /// # Ok(()) }
    /// ```
    pub async fn refund(&self, key: impl AsRef<[u8]>, n: u64, of: &Decision) -> Result<Decision, Error> {
        self.refund_of(key.as_ref(), n, Refunded::of(of)).await
    }

    /// [`refund`](Self::refund) of the call `of` describes: through the
    /// pipeline, which counts no decision for it.
    pub(crate) async fn refund_of(&self, key: &[u8], n: u64, of: Refunded) -> Result<Decision, Error> {
        let algorithm = self.rule.policy.algorithm();
        if !algo::refunds(algorithm) {
            return Err(algo::refund_refused(algorithm));
        }
        let result = self.decide(key, n, CallKind::Refund(of)).await;
        // Permits came back: a remembered denial may name too late a time.
        // Forgotten on a failure too, which may still have reached the store.
        if let Some(cache) = &self.deny_cache {
            cache.forget(key);
        }
        result
    }
}

/// The refunds of one limiter's admitted calls (an annotated function's
/// `refund_on = "err"`, a layer's `refund_on`, and an outer limit's when an
/// inner one denied the call) that could not be made: logged as an outage is.
#[derive(Debug)]
pub(crate) struct RefundLog {
    failures: OutageLog,
    /// The policy turned out, at run time, to be of an algorithm without refunds.
    refused: AtomicBool,
}

impl RefundLog {
    pub(crate) const fn new() -> RefundLog {
        RefundLog { failures: OutageLog::new(), refused: AtomicBool::new(false) }
    }

    /// Settles at `actual` the `estimate` the call `of` answered took of
    /// `key` through `limiter` (the call's own policy applied): a refund of
    /// it all when `actual` is 0. Returns the key's state after it; logs
    /// what went wrong, and returns `None`.
    pub(crate) async fn settle(
        &self,
        limiter: &Limiter,
        key: &[u8],
        (estimate, actual): (u64, u64),
        of: Refunded,
    ) -> Option<Decision> {
        // Nothing to give back or charge: the call's decision still stands.
        if estimate == actual {
            return None;
        }
        let site = limiter.name();
        let algorithm = limiter.policy().algorithm();
        // A concurrency permit comes back when its holder drops it: nothing
        // is lost unless a settlement owes more.
        if algorithm == AlgorithmKind::Concurrency && actual <= estimate {
            return None;
        }
        if !algo::refunds(algorithm) {
            // A policy named or given per call, or an outer limit of a stack:
            // the macro refuses `refund_on` beside an inline policy that keeps none.
            if !self.refused.swap(true, Ordering::Relaxed) {
                tracing::warn!(target: "redlimit", limiter = site, algo = algorithm.name(),
                    "a refund gives nothing back: a {algorithm} policy keeps no refunds (fixed_window, \
                     token_bucket, leaky_bucket and gcra do), so a call that refund_on picked, or that a \
                     limit inside this one denied, keeps its permits, and a settled call its estimate; said once");
            }
            return None;
        }
        let clock = &limiter.inner.store.clock;
        let now_us = || clock.now_us().unwrap_or_else(crate::clock::process_now_us);
        let error = match limiter.settle_of(key, estimate, actual, of).await {
            Ok(after) => {
                if let Some(recovery) = self.failures.answered(now_us) {
                    tracing::info!(target: "redlimit", limiter = site,
                        "refunds reach the rate limit store again after {:?}; {} could not be made",
                        rounded(recovery.lasted), recovery.failures);
                }
                return Some(after);
            }
            Err(error) => error,
        };
        match self.failures.failed(now_us()) {
            Some(Report::First { .. }) => {
                tracing::warn!(target: "redlimit", limiter = site, kind = observe::error_kind(&error), %error,
                        "a refund could not be made, so the call's permits stay taken (a settlement's, as \
                         estimated); further failures are summed up every {LOG_INTERVAL:?}");
            }
            Some(Report::Ongoing { failures, over }) => {
                tracing::warn!(target: "redlimit", limiter = site, kind = observe::error_kind(&error), %error,
                        "{failures} refunds or settlements could not be made in the last {:?}", rounded(over));
            }
            None => {}
        }
        None
    }
}
