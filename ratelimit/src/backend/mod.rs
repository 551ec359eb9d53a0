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

use crate::clock::Clock;
use crate::{Decision, Error, Policy};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

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
/// use redlimit::__private::{Answer, Backend, Binding, Call, CallKind, MemoryBackend};
/// use redlimit::Policy;
///
/// let policy = Policy::gcra("1/1s", 2)?;
/// let binding = Binding { prefix: "redlimit", name: "api", policy: &policy, server_clock: false };
/// let bound = MemoryBackend::new().bind(binding);
/// let call = Call { cost: 1, kind: CallKind::Check, now_us: Some(1_767_225_600_000_000) };
/// let Answer::Now(Ok(outcome)) = bound.decide(b"alice", call) else { panic!("the memory store answers at once") };
/// assert_eq!((outcome.allowed, outcome.remaining), (true, 2));
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

/// One limiter on one store: decides, peeks, refunds and resets its keys.
pub trait Bound: Send + Sync + 'static {
    /// Decides one call for the user's `key`: at once when the store is in
    /// this process, else through a future.
    fn decide<'a>(&'a self, key: &[u8], call: Call) -> Answer<'a>;

    /// Decides one call at the time `clock` gives (`None`: the store's own
    /// clock), read when the store decides: the memory store reads it
    /// under the key's lock, so calls on one key are decided in the order
    /// of their times. By default, read at once and passed to
    /// [`decide`](Bound::decide).
    ///
    /// Every store judges a call no earlier than the latest time its key
    /// records, so a late call is answered as at that time:
    ///
    /// ```
    /// use redlimit::__private::{Answer, Backend, Binding, CallKind, MemoryBackend};
    /// use redlimit::{ManualClock, Policy};
    ///
    /// let policy = Policy::sliding_log("2/1s")?;
    /// let binding = Binding { prefix: "redlimit", name: "api", policy: &policy, server_clock: false };
    /// let bound = MemoryBackend::new().bind(binding);
    /// let clock = ManualClock::new();
    /// let Answer::Now(Ok(first)) = bound.decide_by(b"k", 1, CallKind::Check, &clock) else { panic!("in memory") };
    /// clock.set_us(first.now_us - 500_000);
    /// let Answer::Now(Ok(late)) = bound.decide_by(b"k", 1, CallKind::Check, &clock) else { panic!("in memory") };
    /// assert_eq!((late.allowed, late.remaining, late.now_us), (true, 0, first.now_us));
    /// # Ok::<(), redlimit::Error>(())
    /// ```
    fn decide_by<'a>(&'a self, key: &[u8], cost: u64, kind: CallKind, clock: &dyn Clock) -> Answer<'a> {
        self.decide(key, Call { cost, kind, now_us: clock.now_us() })
    }

    /// Decides one call in this process, at once, as the caller's
    /// [`Decision`] under `policy` (the policy this store was bound with):
    /// how the pipeline asks a store that is not [`remote`](Bound::remote),
    /// with no [`Outcome`] or future between the store and the caller. By
    /// default, [`decide_by`](Bound::decide_by)'s answer made a decision; a
    /// store in this process must answer at once, so a later answer is an error.
    fn decide_here(
        &self,
        key: &[u8],
        cost: u64,
        kind: CallKind,
        clock: &dyn Clock,
        policy: &Policy,
    ) -> Result<Decision, Error> {
        match self.decide_by(key, cost, kind, clock) {
            Answer::Now(outcome) => outcome.map(|outcome| Decision::from_outcome(outcome, policy)),
            Answer::Later(_) => Err(Error::Protocol("a store in this process did not answer at once".into())),
        }
    }

    /// Forgets `key`: its next call sees an untouched state.
    fn reset<'a>(&'a self, key: &[u8]) -> BoxFuture<'a, Result<(), Error>>;

    /// The store is in another process: its answers are worth remembering
    /// (the deny cache) and timing (a metric).
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
}

/// One call's parameters besides its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// Permits to take, or to give back (0 reports the state).
    pub cost: u64,
    /// What the call does with them.
    pub kind: CallKind,
    /// Microseconds since the epoch, or `None` for the store's own clock.
    pub now_us: Option<u64>,
}

/// What a [`Call`] does: the scripts' third ARGV (`lua/prelude.lua`).
///
/// A concurrency policy's permits are held, not spent: `Acquire`,
/// `Release` and `Renew` (the permit's calls) reach only its store, and a
/// check or peek there reports whether `cost` permits are free, holding
/// nothing. Any other pairing is refused, writing nothing (`algo::refused`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// Take the cost if every rule allows it.
    Check,
    /// Answer as a check would, taking nothing.
    Peek,
    /// Give back up to the cost of the call [`Refunded`] describes, never
    /// past an untouched state, and report the state as a check of cost 0
    /// would. Only for the algorithms that keep refunds (`algo::refunds`);
    /// any other store answers [`Error::InvalidConfig`] and writes nothing.
    Refund(Refunded),
    /// Hold `cost` permits as the permit `id` for one lease, if they fit.
    Acquire(PermitId),
    /// Give back the permit `id` of weight `cost`; nothing if it is not held.
    Release(PermitId),
    /// Run the lease of the permit `id` of weight `cost` again from now, if
    /// it is still held; a lease that ended is never taken again.
    Renew(PermitId),
}

/// The call a refund gives permits back to, as its decision reported it:
/// a refund must know what it refunds, or a late one credits whatever
/// counts now. On the wire (`lua/prelude.lua`), `struct.pack('<dd',
/// taken_us, window_end_us)`, where a permit's id travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refunded {
    /// When the refunded call was judged: its `decided_at`, µs since the epoch.
    pub taken_us: u64,
    /// Its `decided_at + reset_after`, µs since the epoch: when the key it
    /// was decided on would have been untouched again.
    pub window_end_us: u64,
}

impl Refunded {
    /// The refunded call of `decision`, the only place its times are read.
    ///
    /// ```
    /// use redlimit::__private::Refunded;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::new("api", Policy::fixed_window("5/1s")?, &Store::memory().with_clock(clock.clone()));
    /// let decision = limiter.check("alice", 1).await?;
    /// let refunded = Refunded::of(&decision);
    /// assert_eq!(refunded.window_end_us - refunded.taken_us, 1_000_000);
    /// # Ok(()) }
    /// ```
    pub fn of(decision: &Decision) -> Refunded {
        let since_epoch = decision.decided_at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let taken_us = u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX);
        let reset_us = u64::try_from(decision.reset_after.as_micros()).unwrap_or(u64::MAX);
        Refunded { taken_us, window_end_us: taken_us.saturating_add(reset_us) }
    }

    /// The 16 bytes the scripts read as the call's `permit`.
    #[cfg(feature = "redis")]
    pub(crate) fn to_bytes(self) -> [u8; 16] {
        let mut bytes = [0; 16];
        // Doubles hold every µs of this era exactly (below 2^53).
        bytes[..8].copy_from_slice(&(self.taken_us as f64).to_le_bytes());
        bytes[8..].copy_from_slice(&(self.window_end_us as f64).to_le_bytes());
        bytes
    }
}

/// One held permit's name in the store: unique across processes (a random
/// number drawn once per process, then a count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PermitId(pub [u8; 16]);

impl PermitId {
    /// A name no other permit of any process has.
    pub fn unique() -> PermitId {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::OnceLock;
        static PROCESS: OnceLock<u64> = OnceLock::new();
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // std's hasher keys are drawn from the system's random source.
        let process = *PROCESS.get_or_init(|| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u32(std::process::id());
            hasher.write_u64(crate::clock::system_now_us());
            hasher.finish()
        });
        let mut id = [0; 16];
        id[..8].copy_from_slice(&process.to_le_bytes());
        id[8..].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        PermitId(id)
    }
}

/// A bound store's answer: now, or later.
pub enum Answer<'a> {
    /// Decided in this process.
    Now(Result<Outcome, Error>),
    /// Decided by a round trip.
    Later(BoxFuture<'a, Result<Outcome, Error>>),
}

/// A decision as the store computes it: integers only, what the Lua scripts
/// return. [`Limiter`](crate::Limiter) turns it into a [`Decision`](crate::Decision).
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
