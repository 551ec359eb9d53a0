//! [`Call`]: one value describing what a call asks of a limiter's store,
//! the key, the cost and the [`CallKind`], from the entry point down to the
//! store; and the names a call gives the permits it holds or refunds.

use crate::decision::Decision;

/// One call: which key, how many permits, and what it does with them.
///
/// ```
/// use redlimit::__private::{Call, CallKind};
///
/// let call = Call::check(b"alice", 2);
/// assert_eq!((call.key, call.cost, call.kind), (&b"alice"[..], 2, CallKind::Check));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The user's key (the store adds the limiter's prefix).
    pub key: &'a [u8],
    /// Permits to take, or to give back (0 reports the state).
    pub cost: u64,
    /// What the call does with them.
    pub kind: CallKind,
}

impl<'a> Call<'a> {
    /// A check: take `cost` permits of `key` if every rule allows it.
    pub fn check(key: &'a [u8], cost: u64) -> Call<'a> {
        Call { key, cost, kind: CallKind::Check }
    }

    /// The same call doing `kind` instead.
    pub fn with_kind(self, kind: CallKind) -> Call<'a> {
        Call { kind, ..self }
    }
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
    /// any other store answers [`Error::InvalidConfig`](crate::Error::InvalidConfig) and writes nothing.
    Refund(Refunded),
    /// Take `cost` permits whatever the room, never denied: what a
    /// settlement owes above its reservation's estimate, counted past the
    /// limit as debt that later calls wait off; reports the state after it
    /// as a check of cost 0 would. Only for the algorithms that keep
    /// refunds, as a refund is.
    Charge,
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
