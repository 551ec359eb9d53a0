//! [`Decision`]: what the store answered for one call.

use crate::policy::Strategy;
use std::time::{Duration, SystemTime};

/// The answer to one [`check`](crate::Limiter::check) or [`peek`](crate::Limiter::peek).
///
/// Only a store makes one (new fields may be added); its fields are read.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, ManualClock, Policy, Store};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let store = Store::memory().with_clock(clock.clone());
/// let limiter = Limiter::new("docs", Policy::fixed_window("2/1s,3/1m")?, &store);
///
/// let d = limiter.check("alice", 1).await?;
/// assert!(d.allowed);
/// assert_eq!((d.limit, d.remaining), (2, 1));
/// limiter.check("alice", 1).await?;
///
/// let denied = limiter.check("alice", 1).await?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Some(Duration::from_secs(1)));
/// assert_eq!(denied.violated[0].to_string(), "2/1s");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the call may proceed (its cost was taken).
    pub allowed: bool,
    /// The limit of the strategy with the least room (capacity for buckets, burst + 1 for GCRA).
    pub limit: u64,
    /// Permits left after this call; for a denied call, what is left now.
    pub remaining: u64,
    /// Time until the key is back to its full, untouched state.
    pub reset_after: Duration,
    /// On a denial, the earliest time the same call would pass (rounded up:
    /// obeying it succeeds). `None` when allowed, and when the cost is larger
    /// than the policy could ever admit.
    pub retry_after: Option<Duration>,
    /// Every violated strategy, in declared order (window algorithms only).
    pub violated: Vec<Strategy>,
    /// When the store decided, on the clock it decided by (Redis server time
    /// by default): `decided_at + reset_after` is when the key is untouched
    /// again, whichever server the next call reaches.
    pub decided_at: SystemTime,
    /// One entry per strategy, declared order, for window policies with more
    /// than one strategy; empty otherwise (then `limit`/`remaining`/`reset_after`
    /// describe the only rule).
    pub quotas: Vec<Quota>,
}

/// One strategy's state after a decision: what an IETF `RateLimit` header
/// reports per policy item.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, ManualClock, Policy, Store};
/// use std::time::Duration;
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("docs", Policy::fixed_window("2/1s,3/1m")?, &store);
/// limiter.check("alice", 1).await?;
/// let d = limiter.check("alice", 1).await?;
/// let quotas: Vec<_> = d.quotas.iter().map(|q| (q.strategy.to_string(), q.remaining, q.reset_after)).collect();
/// assert_eq!(quotas, [("2/1s".to_string(), 0, Duration::from_secs(1)), ("3/1m".to_string(), 1, Duration::from_secs(60))]);
///
/// // Denied by the first strategy only: it alone names a time to retry.
/// let denied = limiter.check("alice", 1).await?;
/// let retries: Vec<_> = denied.quotas.iter().map(|q| q.retry_after).collect();
/// assert_eq!(retries, [Some(Duration::from_secs(1)), None]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quota {
    /// The strategy, as declared.
    pub strategy: Strategy,
    /// Permits left on this strategy after the call (now, if denied).
    pub remaining: u64,
    /// Time until this strategy's state is untouched again.
    pub reset_after: Duration,
    /// On a denial, the time until this strategy alone would let the same
    /// call pass (rounded up); `None` when it is not violated, or when no
    /// wait helps. The decision's `retry_after` is the latest of these.
    pub retry_after: Option<Duration>,
}

impl Decision {
    /// True when the call was denied and can never pass, whatever the wait:
    /// its cost exceeds what the policy could ever admit.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, Policy, Store};
    ///
    /// let limiter = Limiter::new("uploads", Policy::token_bucket(10, "1/1s")?, &Store::memory());
    /// let too_big = limiter.check("alice", 11).await?;
    /// assert!(too_big.can_never_pass());
    /// assert_eq!((too_big.retry_after, too_big.remaining), (None, 10));
    /// assert!(!limiter.check("alice", 10).await?.can_never_pass());
    /// # Ok(()) }
    /// ```
    pub fn can_never_pass(&self) -> bool {
        !self.allowed && self.retry_after.is_none()
    }
}
