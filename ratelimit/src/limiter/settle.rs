//! Reservations: [`Limiter::reserve`] takes an estimate when the real cost
//! is known only after the work (tokens a completion uses, bytes a
//! download sends), and [`Permit::settle`](crate::Permit::settle) settles
//! it with the actual cost: what the estimate took too much comes back as
//! a refund does ([`Limiter::refund`]), what it took too little is
//! charged ([`CallKind::Charge`]), past the limit if need be. No path of
//! its own: a reservation is an admitted check, a settlement one refund or
//! one charge through the pipeline.

use crate::call::{Call, CallKind, Refunded};
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::enforcement::OnLimit;
use crate::permit::Permit;
use crate::rate_limited::RateLimited;
use crate::{algo, Limiter};
use redlimit_grammar::AlgorithmKind;
use std::cmp::Ordering;

impl Limiter {
    /// Takes `estimate` permits of `key` if the policy allows it, as
    /// [`limit`](Self::limit) does, and returns the reservation: a
    /// [`Permit`] to [`settle`](Permit::settle) with the actual cost once it
    /// is known.
    ///
    /// A settlement gives back what the estimate took above the actual cost
    /// (as [`refund`](Self::refund) gives back, so a late one gives back
    /// only what the reservation still holds), and charges what the actual
    /// cost is above the estimate, whatever the room: an overage may take
    /// the key past its limit, and that debt is owed (later calls wait it
    /// off: a bucket's or gcra's debt, a window's count over its limit). A
    /// reservation dropped unsettled keeps its estimate.
    ///
    /// Only the algorithms that keep refunds take reservations
    /// (`fixed_window`, `token_bucket`, `leaky_bucket`, `gcra`): any other is
    /// an `Err` whose reason is [`DenialReason::Misused`](crate::DenialReason::Misused).
    /// A denial is `Err(RateLimited)` at once; a store failure is settled by
    /// the limiter's [`OnError`](crate::OnError) (a call let through holds
    /// nothing of the store's, and its settlement charges nothing).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let tokens = Limiter::new("llm", Policy::token_bucket(1000, "1000/1m")?, &store);
    ///
    /// // The prompt suggests 300 tokens; the completion used 120.
    /// let reservation = tokens.reserve("key-1", 300).await.unwrap();
    /// assert_eq!(reservation.decision().remaining, 700);
    /// assert_eq!(reservation.settle(120).await?.remaining, 880);
    ///
    /// // This one used 1 500: the key owes 620 past its limit.
    /// let reservation = tokens.reserve("key-1", 800).await.unwrap();
    /// let after = reservation.settle(1500).await?;
    /// assert!(!after.allowed && after.remaining == 0);
    /// assert_eq!(after.retry_after, Some(std::time::Duration::from_millis(37_200)), "620 tokens at 1000/1m");
    /// assert!(tokens.reserve("key-1", 1).await.is_err(), "owed: later calls wait it off");
    ///
    /// let log = Limiter::new("logins", Policy::sliding_log("3/1m")?, &store);
    /// assert_eq!(log.reserve("alice", 1).await.unwrap_err().reason(), redlimit::DenialReason::Misused);
    /// # Ok(()) }
    /// ```
    pub async fn reserve(&self, key: impl AsRef<[u8]>, estimate: u64) -> Result<Permit, RateLimited> {
        let key = key.as_ref();
        let algorithm = self.rule.policy.algorithm();
        if !algo::refunds(algorithm) {
            return Err(self.misused(key, reserve_refused(algorithm)));
        }
        let call = Call::check(key, estimate);
        let permit = self.admit(call, OnLimit::Error).await?;
        Ok(self.reserved(call, permit))
    }

    /// Settles `key`'s reservation of `estimate`, which the call `of`
    /// describes took, at `actual`: one refund, one charge, or a report.
    pub(crate) async fn settle_of(
        &self,
        key: &[u8],
        estimate: u64,
        actual: u64,
        of: Refunded,
    ) -> Result<Decision, Error> {
        match actual.cmp(&estimate) {
            Ordering::Less => self.refund_of(key, estimate - actual, of).await,
            Ordering::Greater => {
                let algorithm = self.rule.policy.algorithm();
                if !algo::refunds(algorithm) {
                    return Err(algo::refund_refused(algorithm));
                }
                // A charge only takes room: a remembered denial stays true.
                self.decide(key, actual - estimate, CallKind::Charge).await
            }
            Ordering::Equal => self.decide(key, 0, CallKind::Peek).await,
        }
    }
}

/// Why a limiter of `algorithm` takes no reservation.
fn reserve_refused(algorithm: AlgorithmKind) -> String {
    if algorithm == AlgorithmKind::Concurrency {
        return "a concurrency limiter takes no reservation: its permits are held, not spent; take one with \
                `Limiter::acquire`"
            .into();
    }
    format!(
        "a {algorithm} limiter takes no reservation: it records when each permit was taken, and a settlement \
         could not give back part of one; reservations work with fixed_window, token_bucket, leaky_bucket and gcra"
    )
}
