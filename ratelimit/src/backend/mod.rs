//! [`Backend`] and [`Bound`]: a store binds each limiter once, and the bound
//! store decides that limiter's calls. Not a public API: the traits and the
//! wire format ([`Outcome`]) are reached through `redlimit::__private` by
//! tests and the bench only, and change with the scripts.

pub(crate) mod memory;
#[cfg(feature = "redis")]
pub(crate) mod redis;
mod unavailable;

pub use self::memory::MemoryBackend;
#[cfg(feature = "redis")]
pub use self::redis::connection::options::RedisOptions;
#[cfg(feature = "redis")]
pub use self::redis::RedisBackend;
pub(crate) use self::unavailable::Unavailable;
pub use crate::call::{Call, CallKind, PermitId, Refunded};

use crate::clock::Clock;
use crate::decision::{Decision, Quota};
use crate::error::Error;
use crate::policy::{Policy, Strategy};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// With a client-supplied clock, keys are kept this long past their reset:
/// Redis expires keys by its own clock, so a client clock running behind (or
/// stepping back, or a manual clock in a test) must not find its state gone.
/// The memory backend keeps the same slack so both give the same answers.
pub(crate) const CLIENT_CLOCK_SLACK_US: u64 = 60_000_000;

/// A boxed, sendable future: what a [`Bound`] store answers through when it
/// cannot answer at once.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store: it binds each limiter once, with everything that does not change
/// between its calls worked out ahead (keys' prefix, script, reply reader).
///
/// [`Limiter::new`](crate::Limiter::new) binds its store this way; the bound
/// store answers every call of that limiter:
///
/// ```
/// use redlimit::__private::{Answer, Backend, Binding, Call, MemoryBackend};
/// use redlimit::{ManualClock, Policy};
///
/// let policy = Policy::gcra("1/1s", 2)?;
/// let binding = Binding { prefix: "redlimit", name: "api", policy: &policy, server_clock: false };
/// let bound = MemoryBackend::new().bind(binding);
/// let clock = ManualClock::starting_at(1_767_225_600_000_000);
/// let Answer::Now(Ok(decision)) = bound.decide(Call::check(b"alice", 1), &clock) else { panic!("the memory store answers at once") };
/// assert_eq!((decision.allowed, decision.remaining), (true, 2));
/// # Ok::<(), redlimit::Error>(())
/// ```
pub trait Backend: Send + Sync + 'static {
    /// Binds one limiter's calls.
    fn bind(&self, limiter: Binding<'_>) -> Arc<dyn Bound>;

    /// A short name for logs and `Debug`: `"memory"` or `"redis"`.
    fn kind(&self) -> &'static str;
}

/// What a [`Backend`] binds: one limiter.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The store's key prefix ([`Store::with_prefix`](crate::Store::with_prefix)).
    pub prefix: &'a str,
    /// The limiter's name.
    pub name: &'a str,
    /// The limiter's policy.
    pub policy: &'a Policy,
    /// Calls carry no time: the store decides by its own clock.
    pub server_clock: bool,
}

/// One limiter's policy on one store: decides, peeks, refunds and resets its keys.
pub trait Bound: Send + Sync + 'static {
    /// Decides `call` at the time `clock` gives (`None`: the store's own
    /// clock), as the caller's [`Decision`]: at once when the store is in
    /// this process, else through a round trip. The memory store reads the
    /// clock under the key's lock, so calls on one key are decided in the
    /// order of their times.
    ///
    /// Every store judges a call no earlier than the latest time its key
    /// records, so a late call is answered as at that time:
    ///
    /// ```
    /// use redlimit::__private::{Answer, Backend, Binding, Call, MemoryBackend};
    /// use redlimit::{Clock, ManualClock, Policy};
    ///
    /// let policy = Policy::sliding_log("2/1s")?;
    /// let binding = Binding { prefix: "redlimit", name: "api", policy: &policy, server_clock: false };
    /// let bound = MemoryBackend::new().bind(binding);
    /// let clock = ManualClock::new();
    /// let Answer::Now(Ok(first)) = bound.decide(Call::check(b"k", 1), &clock) else { panic!("in memory") };
    /// clock.set_us(clock.now_us().unwrap() - 500_000);
    /// let Answer::Now(Ok(late)) = bound.decide(Call::check(b"k", 1), &clock) else { panic!("in memory") };
    /// assert_eq!((late.allowed, late.remaining, late.decided_at), (true, 0, first.decided_at));
    /// # Ok::<(), redlimit::Error>(())
    /// ```
    fn decide<'a>(&'a self, call: Call<'_>, clock: &dyn Clock) -> Answer<'a>;

    /// Forgets `key`: its next call sees an untouched state.
    fn reset<'a>(&'a self, key: &[u8]) -> BoxFuture<'a, Result<(), Error>>;

    /// The store is in another process: its answers are worth remembering
    /// (the deny cache) and timing (a metric). Asked once, when bound.
    fn remote(&self) -> bool;

    /// How long one call may take before it fails with [`Error::Timeout`]
    /// of this duration: what bounds a prefetching call's whole wait.
    /// `None` (the default) for a store that answers at once, in this process.
    ///
    /// ```
    /// use redlimit::__private::{Backend, Binding, MemoryBackend};
    /// use redlimit::Policy;
    ///
    /// let policy = Policy::gcra("1/1s", 2)?;
    /// let binding = Binding { prefix: "redlimit", name: "api", policy: &policy, server_clock: false };
    /// assert_eq!(MemoryBackend::new().bind(binding).response_timeout(), None);
    /// # Ok::<(), redlimit::Error>(())
    /// ```
    fn response_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// The generation of the store's data this process knows: it changes
    /// when the data may have gone (a Redis server found restarted or
    /// flushed), and the deny cache serves no denial remembered under
    /// another. `0` (the default) for a store whose data never goes.
    fn data_epoch(&self) -> u64 {
        0
    }
}

/// A bound store's answer: now, or later.
pub enum Answer<'a> {
    /// Decided in this process.
    Now(Result<Decision, Error>),
    /// Decided by a round trip.
    Later(BoxFuture<'a, Result<Decision, Error>>),
}

/// A decision as the store computes it: integers only, what the Lua scripts
/// return. [`Limiter`](crate::Limiter) turns it into a [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The call passes.
    pub allowed: bool,
    /// Limit of the strategy with the least room.
    pub limit: u64,
    /// Permits left after the call.
    pub remaining: u64,
    /// µs until the key is untouched again.
    pub reset_after_us: u64,
    /// µs until the same call would pass; `None` when allowed or never.
    pub retry_after_us: Option<u64>,
    /// Bit `i` set: strategy `i` (declared order) is violated.
    pub violated: u32,
    /// The time the call was judged at, µs since the epoch: the store's
    /// clock, or the one the call carried, moved up to the latest time the
    /// key's state records when that is later (a late call is never judged
    /// before one already recorded).
    pub now_us: u64,
    /// Per strategy (declared order), for window policies with more than
    /// one strategy; empty otherwise (then the fields above describe the
    /// only rule).
    pub quotas: Vec<QuotaOutcome>,
}

impl Outcome {
    /// This outcome as the caller's [`Decision`] under `policy`, the policy
    /// the store was bound with: what a store's [`Bound::decide`] answers.
    /// Inlined: the memory store builds it in place, in its caller's answer.
    #[inline(always)]
    pub fn into_decision(self, policy: &Policy) -> Decision {
        let outcome = self;
        let Outcome { allowed, limit, remaining, reset_after_us, retry_after_us, violated, now_us, quotas } = outcome;
        // Most decisions violate nothing and carry no quotas: nothing to look up.
        let (violated, quotas) = match (violated, quotas.is_empty()) {
            (0, true) => (Vec::new(), Vec::new()),
            _ => violated_and_quotas(policy, violated, &quotas),
        };
        Decision {
            allowed,
            limit,
            remaining,
            reset_after: Duration::from_micros(reset_after_us),
            retry_after: retry_after_us.map(Duration::from_micros),
            violated,
            decided_at: UNIX_EPOCH + Duration::from_micros(now_us),
            quotas,
        }
    }
}

/// The violated strategies (bit `i`: strategy `i`) and the per-strategy quotas, by strategy.
#[cold]
fn violated_and_quotas(policy: &Policy, violated: u32, quotas: &[QuotaOutcome]) -> (Vec<Strategy>, Vec<Quota>) {
    let strategies = policy.strategies();
    let violated = strategies.iter().enumerate().filter(|(i, _)| violated >> i & 1 == 1).map(|(_, s)| *s).collect();
    let quotas = quotas
        .iter()
        .zip(strategies)
        .map(|(quota, &strategy)| Quota {
            strategy,
            remaining: quota.remaining,
            reset_after: Duration::from_micros(quota.reset_after_us),
            retry_after: quota.retry_after_us.map(Duration::from_micros),
        })
        .collect();
    (violated, quotas)
}

/// One strategy's part of an [`Outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaOutcome {
    /// Permits left on this strategy after the call (now, if denied).
    pub remaining: u64,
    /// µs until this strategy's state is untouched again.
    pub reset_after_us: u64,
    /// On a denial, µs until this strategy alone would let the same call
    /// pass; `None` when it is not violated, or when no wait helps.
    pub retry_after_us: Option<u64>,
}
