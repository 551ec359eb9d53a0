//! Prefetch for hot keys: a limiter takes up to k permits of a key from the
//! store in one call and spends them in this process, so a hot key costs
//! the store about one call per k decisions. The permits are taken in the
//! store when prefetched, so every process together never admits more than
//! the policy admitted at those times; `quota/` decides one call.
//!
//! The folder owns prefetch: a limiter's and a site's (here), the records of
//! the keys it holds quotas for (`records.rs`), and one key's quota deciding
//! a call (`quota/`: the permits held, spent without a lock, in `held.rs`;
//! its refills' state under its lock in `local.rs`; and when a prefetching
//! call's wait ends in `deadline.rs`).

mod quota;
mod records;

use crate::backend::CallKind;
use crate::decision::Decision;
use crate::error::Error;
use crate::prefetch::quota::{alone, now_us, policy_id, Deadline, Moved};
use crate::{algo, Limiter};
use records::{Records, Tally};
#[cfg(test)]
use records::{MAX_RECORDS, SWEEP_ABOVE};
use redlimit_grammar::AlgorithmKind;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How long prefetched permits of a token bucket, leaky bucket or GCRA
/// limiter may be spent after they were asked for, unless set with
/// [`Limiter::with_prefetch_ttl`].
pub const DEFAULT_PREFETCH_TTL: Duration = Duration::from_millis(50);

/// A limiter's local quotas, shared by its clones (and, for an annotated
/// function, by every call of its site).
#[derive(Debug)]
pub(crate) struct Prefetch {
    max: u64,
    ttl_us: u64,
    /// Written only for a new key, a sweep or a reset: spending only reads it.
    quotas: RwLock<Option<Records>>,
    /// Made at the first count, shared with the tasks that give permits back.
    tally: once_cell::sync::OnceCell<Arc<Tally>>,
}

/// An annotated function's prefetch: its size, and the quotas every call
/// of the site shares (whatever limiter it decides by: per call, or in a
/// scope), made at the first call.
#[derive(Debug)]
pub(crate) struct SitePrefetch {
    /// Set by a const builder, which cannot replace a value that has a destructor.
    pub(crate) max: u64,
    made: std::sync::OnceLock<Arc<Prefetch>>,
}

impl SitePrefetch {
    pub(crate) const fn off() -> SitePrefetch {
        SitePrefetch { max: 0, made: std::sync::OnceLock::new() }
    }

    fn get(&self) -> Option<&Arc<Prefetch>> {
        (self.max > 1).then(|| self.made.get_or_init(|| Arc::new(Prefetch::new(self.max, DEFAULT_PREFETCH_TTL))))
    }
}

/// What a limiter's prefetch did with permits, since the limiter was made.
/// `prefetched` is `spent + returned + wasted` plus what is held locally now.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, ManualClock, Policy, Store};
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("api", Policy::fixed_window("1000/1m")?, &store).with_prefetch(8)?;
/// for _ in 0..4 {
///     limiter.check("hot", 1).await?;
/// }
/// let stats = limiter.prefetch_stats();
/// // Refills of 1 and 2, the third call spent here, then a refill of 4: 3 held here.
/// assert_eq!((stats.prefetched, stats.spent, stats.returned, stats.wasted), (7, 4, 0, 0));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrefetchStats {
    /// Permits taken from the store by refills, and by calls that went to
    /// the store alone (as a refill of their own cost, spent at once).
    pub prefetched: u64,
    /// Permits spent by calls, the refills' own calls included.
    pub spent: u64,
    /// Unspent permits given back to the store with a refund.
    pub returned: u64,
    /// Unspent permits that could not be given back (a fixed window that
    /// ended, a refund that failed, a limiter dropped outside a runtime).
    pub wasted: u64,
}

const PREFETCHED: usize = 0;
const SPENT: usize = 1;
const RETURNED: usize = 2;
const WASTED: usize = 3;

impl Prefetch {
    /// Prefetch of up to `max` permits, a bucket's or GCRA's spendable for `ttl`.
    pub(crate) const fn new(max: u64, ttl: Duration) -> Prefetch {
        let ttl_us = ttl.as_micros();
        let ttl_us = if ttl_us > u64::MAX as u128 { u64::MAX } else { ttl_us as u64 };
        Prefetch { max, ttl_us, quotas: RwLock::new(None), tally: once_cell::sync::OnceCell::new() }
    }
}

impl Limiter {
    /// This limiter with prefetch for hot keys: a check of a key may take up
    /// to `k` permits from the store in one call and spend them in this
    /// process, so a key called thousands of times a second costs the store
    /// about one call per `k` decisions.
    ///
    /// A refill asks for 1 permit (the call's cost, if larger); each refill
    /// that follows the last within the prefetch TTL asks for twice as many,
    /// and for the calls that found no room in the last one, up to `k`; a
    /// denial or a pause longer than the TTL starts again from one permit.
    /// So a key called less often than once per TTL gets exactly the
    /// answers it gets without prefetch. Prefetched permits are taken in the
    /// store when asked for, so the processes together never admit more
    /// than the policy admitted at those times. They may be spent only
    /// until the fixed window they were taken in ends (so a fixed window's
    /// count is exact) and for at most the TTL ([`DEFAULT_PREFETCH_TTL`],
    /// [`with_prefetch_ttl`](Self::with_prefetch_ttl)); permits left when
    /// they expire are refunded, unless their fixed window ended. README,
    /// "Hot keys: prefetch", states the largest extra burst a bucket or
    /// GCRA can let through.
    ///
    /// A key holds at most `k - 1` permits here whatever policy decides it
    /// ([`with_policy`](Self::with_policy)): they are one policy's, and a
    /// call under another gives them back with its own refill. A limiter
    /// (its clones and per-call policies together) keeps a record for at
    /// most 4,096 keys; past 1,024, records holding no permits that may
    /// still be spent, and not refilled within the TTL, are dropped as new
    /// keys come (at most one sweep per TTL, their expired permits given
    /// back); with 4,096 in use a new key is decided without prefetch.
    ///
    /// One refill at a time goes out per key. A call that finds one in
    /// flight waits for it only if it has room for the call (or, the key's
    /// last refill having been denied, to share its denial), and for no
    /// other refill: left with nothing to spend, it shares that refill's
    /// denial of the same policy and cost or its failure, or makes its own
    /// call. A call without room goes to the store at once. So a call waits
    /// at most one refill's round trip longer than without prefetch, and
    /// never past its arrival plus the store's response timeout (Redis's
    /// `RedisOptions::response_timeout`; the memory store answers at once):
    /// its wait for a refill in flight and its own store calls (a refill's
    /// several tries included) end there, and the call fails with
    /// [`Error::Timeout`] of that timeout, as a store call that timed out
    /// does (`limit` settles it by [`with_on_error`](Self::with_on_error)).
    ///
    /// `check`, `limit`, `wait` and annotated functions prefetch; `peek`
    /// is answered by the store (which counts the prefetched permits as
    /// taken); [`reset`](Self::reset) forgets this process's local permits
    /// of the key, when they count in the state it resets. A call spent locally answers with the refill's decision,
    /// aged, `remaining` counting the permits still held here.
    ///
    /// `k` of 0 or 1 turns prefetch off. Sliding windows and logs cannot
    /// prefetch exactly (a permit counts from when the store recorded it,
    /// not from when it is spent, and cannot be given back), and a
    /// concurrency permit is held, not spent: for those algorithms this
    /// returns `Err(Error::InvalidConfig)`. A limiter with prefetch that
    /// decides by such a policy through [`with_policy`](Self::with_policy)
    /// decides those calls without prefetch.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("api", Policy::fixed_window("10/1m")?, &store).with_prefetch(4)?;
    /// let mut admitted = 0;
    /// for _ in 0..20 {
    ///     admitted += limiter.check("hot", 1).await?.allowed as u32;
    /// }
    /// assert_eq!(admitted, 10, "the window's count stays exact");
    ///
    /// // Three held under a plan of 2000; a call under another plan gives them back first.
    /// let (small, large) = (Policy::fixed_window("1000/1m")?, Policy::fixed_window("2000/1m")?);
    /// for _ in 0..4 {
    ///     limiter.with_policy(&large).check("user", 1).await?; // refills of 1, 2 and 4
    /// }
    /// limiter.with_policy(&small).check("user", 1).await?;
    /// let stats = limiter.prefetch_stats();
    /// assert_eq!((stats.prefetched - stats.spent - stats.returned, stats.returned), (0, 3));
    ///
    /// let log = Limiter::new("logins", Policy::sliding_log("3/1m")?, &store);
    /// assert!(matches!(log.with_prefetch(4), Err(redlimit::Error::InvalidConfig(_))));
    /// # Ok(()) }
    /// ```
    pub fn with_prefetch(self, k: u64) -> Result<Limiter, Error> {
        let ttl = self.prefetch.as_ref().map_or(DEFAULT_PREFETCH_TTL, |p| Duration::from_micros(p.ttl_us));
        self.with_prefetch_ttl(k, ttl)
    }

    /// [`with_prefetch`](Self::with_prefetch) whose bucket and GCRA permits
    /// may be spent for `ttl` after they were asked for (and whose refills
    /// grow while they come within `ttl` of each other). A fixed window's
    /// permits expire at the earlier of `ttl` and their window's end.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let store = Store::memory().with_clock(clock.clone());
    /// let limiter = Limiter::new("api", Policy::token_bucket(100, "10/1s")?, &store)
    ///     .with_prefetch_ttl(8, Duration::from_millis(20))?;
    /// for _ in 0..4 {
    ///     limiter.check("hot", 1).await?; // refills of 1, 2 and 4: 3 held here
    /// }
    /// clock.advance(Duration::from_millis(30)); // expired: the 3 are refunded
    /// let d = limiter.check("hot", 1).await?; // a pause past the ttl: a refill of 1
    /// assert_eq!(d.remaining, 100 - 4 - 1);
    /// assert_eq!(limiter.prefetch_stats().returned, 3);
    /// # Ok(()) }
    /// ```
    pub fn with_prefetch_ttl(mut self, k: u64, ttl: Duration) -> Result<Limiter, Error> {
        let algorithm = self.rule.policy.algorithm();
        if let Some(why) = refused(algorithm) {
            return Err(why);
        }
        self.prefetch = (k > 1).then(|| Arc::new(Prefetch::new(k, ttl)));
        Ok(self)
    }

    /// What this limiter's prefetch did with permits (all zero without prefetch).
    pub fn prefetch_stats(&self) -> PrefetchStats {
        self.prefetch.as_ref().map(|prefetch| prefetch.stats()).unwrap_or_default()
    }

    /// This limiter with a site's prefetch (`#[rate_limit(prefetch = k)]`).
    pub(crate) fn with_site_prefetch(self, prefetch: &SitePrefetch) -> Limiter {
        match prefetch.get() {
            Some(prefetch) => Limiter { prefetch: Some(prefetch.clone()), ..self },
            None => self,
        }
    }

    /// The prefetch taking part in this call: a check of some cost, under
    /// an algorithm that takes prefetch.
    #[inline]
    pub(crate) fn prefetch_for(&self, kind: CallKind, cost: u64) -> Option<&Prefetch> {
        let prefetch = self.prefetch.as_deref()?;
        let takes = kind == CallKind::Check && cost > 0 && refused(self.rule.policy.algorithm()).is_none();
        takes.then_some(prefetch)
    }

    /// One check through the local quota (the pipeline counts it once: the
    /// refills it makes are not decisions of their own).
    pub(crate) async fn prefetched(&self, prefetch: &Prefetch, key: &[u8], cost: u64) -> Result<Decision, Error> {
        let mut moved = Moved::default();
        // The common call of a hot key: spent here, through no lock another call of it holds.
        if let Some(spent) = prefetch.spend((self, key), (policy_id(self), cost), now_us(self), &mut moved) {
            prefetch.tally(self).add(moved);
            return Ok(spent);
        }
        let deadline = Deadline::from_now(self);
        let result = match prefetch.quota(self, key) {
            Some(quota) => quota.decide(self, key, cost, (prefetch.max, prefetch.ttl_us), (&mut moved, deadline)).await,
            // Every record is in use: this key goes as without prefetch.
            None => alone(self, key, cost, (&mut moved, deadline)).await,
        };
        prefetch.tally(self).add(moved);
        result
    }
}

/// Why `algorithm` takes no prefetch, if it does not: the same algorithms
/// as refunds, since unspent permits must go back.
fn refused(algorithm: AlgorithmKind) -> Option<Error> {
    if algo::refunds(algorithm) {
        return None;
    }
    Some(Error::InvalidConfig(match algorithm {
        AlgorithmKind::Concurrency => "a concurrency limiter cannot prefetch: its permits are held while a call \
                                       runs, not spent"
            .into(),
        _ => format!(
            "a {algorithm} limiter cannot prefetch exactly: a permit counts from when the store recorded it, not \
             from when it is spent, and cannot be given back; prefetch works with fixed_window, token_bucket, \
             leaky_bucket and gcra"
        ),
    }))
}

#[cfg(test)]
mod tests;
