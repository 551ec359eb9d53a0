//! Where "now" comes from: the store's own clock, this process's clock, or a manual one.

use once_cell::sync::OnceCell;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time for decisions.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Clock, Limiter, Policy, Store};
///
/// /// Always ten seconds past the epoch.
/// #[derive(Debug)]
/// struct Frozen;
/// impl Clock for Frozen {
///     fn now_us(&self) -> Option<u64> {
///         Some(10_000_000)
///     }
/// }
///
/// let limiter = Limiter::new("api", Policy::fixed_window("1/1s")?, &Store::memory().with_clock(Frozen));
/// let decision = limiter.check("k", 1).await?;
/// assert_eq!(decision.decided_at, std::time::UNIX_EPOCH + std::time::Duration::from_secs(10));
/// # Ok(()) }
/// ```
///
/// Returning `None` means "let the store read its own clock": Redis scripts then
/// call `TIME`, so every app server agrees whatever its local clock says.
/// A reading past 2^52 µs (the year 2112) is taken as that time: the stores'
/// sums of times and windows stay exact and cannot overflow.
pub trait Clock: Send + Sync + Debug + 'static {
    /// Microseconds since the Unix epoch, or `None` for the store's own clock.
    fn now_us(&self) -> Option<u64>;
}

/// The default: Redis server time (`TIME` inside the script).
///
/// The memory backend's own clock is this process's, and it is monotonic: it
/// starts at the wall time of the first in-process decision and moves with
/// a monotonic clock from there, so a step of the system clock (an NTP correction, a manual change)
/// never makes a limit jump or run backwards. Its `decided_at` therefore
/// follows wall time only as closely as the monotonic clock does; use
/// [`SystemClock`] to decide in memory by the wall clock itself.
///
/// ```
/// use redlimit::{Clock, ServerClock, Store};
///
/// assert_eq!(ServerClock.now_us(), None, "the store reads its own");
/// assert_eq!(Store::memory().clock().now_us(), ServerClock.now_us(), "the default");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerClock;

impl Clock for ServerClock {
    fn now_us(&self) -> Option<u64> {
        None
    }
}

/// This process's wall clock, sent to the store with each call. Use it where
/// scripts may not call `TIME`; app servers must then keep their clocks in sync.
///
/// ```
/// use redlimit::{Clock, SystemClock};
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
/// assert!(SystemClock.now_us().unwrap() >= before);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> Option<u64> {
        Some(system_now_us())
    }
}

/// The latest time a decision is judged at (see [`Clock`]).
pub(crate) const LATEST_US: u64 = 1 << 52;

/// A time a call carries, kept to [`LATEST_US`].
pub(crate) fn bounded(now_us: u64) -> u64 {
    now_us.min(LATEST_US)
}

pub(crate) fn system_now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// This process's own time, µs since the epoch: the wall clock read once,
/// then advanced by a monotonic clock. What the memory backend and the deny
/// cache use when no [`Clock`] gives the time; one read serves both.
///
/// The monotonic clock is `quanta`'s: the CPU's time-stamp counter scaled
/// to nanoseconds when the CPU has an invariant one (calibrated against the
/// OS's monotonic clock once, on first use), else the OS's monotonic clock.
/// Reading the counter costs about a third of `clock_gettime`, which matters
/// in a decision that takes tens of nanoseconds.
#[inline]
pub(crate) fn process_now_us() -> u64 {
    let (clock, at, epoch_us) = anchor();
    epoch_us + clock.delta_as_nanos(*at, clock.raw()) / 1000
}

/// Nanoseconds on this process's monotonic clock (see [`process_now_us`])
/// since its first reading: what timing a call to the store costs.
#[inline]
pub(crate) fn process_ns() -> u64 {
    let (clock, at, _) = anchor();
    // Raw readings, scaled once as a difference (0 if the counter reads
    // behind the anchor): no `Instant` or `Duration` between.
    clock.delta_as_nanos(*at, clock.raw())
}

/// The monotonic clock, its first raw reading, and the wall time then (µs).
#[inline]
fn anchor() -> &'static (quanta::Clock, u64, u64) {
    static ANCHOR: OnceCell<(quanta::Clock, u64, u64)> = OnceCell::new();
    ANCHOR.get_or_init(|| {
        let clock = quanta::Clock::new();
        let at = clock.raw();
        (clock, at, system_now_us())
    })
}

/// A clock that moves only when told to: tests replay timelines with it on
/// both backends without sleeping. Clones share one time.
///
/// ```
/// use redlimit::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let start = clock.now_us().unwrap();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now_us().unwrap() - start, 1_500_000);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now_us: Arc<AtomicU64>,
}

impl ManualClock {
    /// Starts at a fixed, realistic epoch time (2026-01-01T00:00:00Z), so
    /// timelines are reproducible.
    pub fn new() -> Self {
        Self::starting_at(1_767_225_600_000_000)
    }

    /// Starts at `now_us` microseconds since the epoch.
    pub fn starting_at(now_us: u64) -> Self {
        ManualClock { now_us: Arc::new(AtomicU64::new(now_us)) }
    }

    /// Moves time forward; time stops at `u64::MAX` µs rather than wrap.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        // The closure always returns Some, so the update cannot fail.
        let _ = self.now_us.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| Some(now.saturating_add(by)));
    }

    /// Sets the time, in microseconds since the epoch.
    pub fn set_us(&self, now_us: u64) {
        self.now_us.store(now_us, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> Option<u64> {
        Some(self.now_us.load(Ordering::SeqCst))
    }
}
