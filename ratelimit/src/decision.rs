//! [`Decision`]: what the store answered for one call.

use crate::Strategy;
use std::time::{Duration, SystemTime};

/// The answer to one [`check`](crate::Limiter::check) or [`peek`](crate::Limiter::peek).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ratelimit::Error> {
/// use ratelimit::{Limiter, ManualClock, Policy, Store};
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
}

impl Decision {
    /// True when the call was denied and can never pass, whatever the wait:
    /// its cost exceeds what the policy could ever admit.
    pub fn can_never_pass(&self) -> bool {
        !self.allowed && self.retry_after.is_none()
    }
}
