//! [`Watchdog`]: one timer for every call in flight on a connection.
//!
//! A `tokio::time::timeout` per call reads the clock and locks the timer
//! wheel twice (to insert the entry and to remove it): about 800
//! instructions of a decision's client cost, more than anything else the
//! runtime added on the Redis path (issue 6). Here one thread per
//! connection advances a coarse clock (a tick every tenth of the response
//! timeout) and wakes the calls whose deadline has passed; a call that has
//! to wait takes a slot for its waker and deadline, and gives it back when
//! it ends. No clock is read per call, and a call answered at its first
//! poll takes no slot at all.
//!
//! With no call waiting, the thread parks instead of ticking: an idle
//! connection costs no wake-ups. The first call to wait after that reads
//! the clock itself (the tick is stale) and unparks the thread.
//!
//! A call fails between the response timeout and one tick after it (later
//! only when the machine does not run the watchdog thread in time, earlier
//! by at most what the thread was late when the call began). When more
//! calls wait than there are slots, the others fall back to a tokio timer
//! of their own, so every call stays bounded.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Calls that can wait at once on one connection without a timer of their
/// own, in groups of 64 (one bit each in a word of [`Shared::taken`]).
const GROUPS: usize = 16;
const SLOTS: usize = GROUPS * 64;
/// Ticks per response timeout: a call fails at most a tenth of it late.
const TICKS_PER_TIMEOUT: u32 = 10;

/// The response timeout of every call sent on one connection.
#[derive(Debug)]
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    timeout: Duration,
}

/// What a call gets when it waited past the response timeout.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Elapsed;

struct Shared {
    /// When tick 0 began, and how long a tick lasts.
    origin: Instant,
    resolution: Duration,
    /// Ticks since the watchdog started, as its thread (or, after the
    /// thread was idle, a call) last counted them.
    tick: AtomicU64,
    /// The thread is parked, or about to park: no call was waiting.
    idle: AtomicBool,
    /// The thread, to unpark (`None` if it could not be started).
    thread: OnceLock<Thread>,
    /// Ticks a call may wait (the response timeout, rounded up).
    ticks: u64,
    /// Which slots calls hold, a word per group, each on its own cache
    /// line: each thread starts looking in its own group, so two threads
    /// rarely write the same line.
    taken: [Padded; GROUPS],
    slots: Box<[Mutex<Slot>]>,
}

#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

#[derive(Default)]
struct Slot {
    /// The tick at which the call holding this slot fails.
    deadline: u64,
    /// `None` once the watchdog has woken the call.
    waker: Option<Waker>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("tick", &self.tick).field("ticks", &self.ticks).finish_non_exhaustive()
    }
}

impl Watchdog {
    /// A watchdog bounding calls by `timeout`, and its thread (which ends
    /// once the watchdog is dropped).
    pub(crate) fn new(timeout: Duration) -> Watchdog {
        let resolution = (timeout / TICKS_PER_TIMEOUT).clamp(Duration::from_millis(1), Duration::from_secs(1));
        let ticks = u64::try_from(timeout.as_nanos().div_ceil(resolution.as_nanos())).unwrap_or(u64::MAX / 2);
        let shared = Arc::new(Shared {
            origin: Instant::now(),
            resolution,
            tick: AtomicU64::new(0),
            idle: AtomicBool::new(false),
            thread: OnceLock::new(),
            ticks,
            taken: Default::default(),
            slots: (0..SLOTS).map(|_| Mutex::default()).collect(),
        });
        let weak = Arc::downgrade(&shared);
        let spawned = std::thread::Builder::new().name("ratelimit-watchdog".into()).spawn(move || watch(weak));
        match spawned {
            Ok(handle) => {
                let _ = shared.thread.set(handle.thread().clone());
            }
            Err(e) => {
                // Without its thread no slot ever expires: mark them all taken,
                // so every call that waits falls back to a timer of its own.
                tracing::warn!(target: "ratelimit", "cannot start the Redis response watchdog ({e}); every call uses its own timer");
                for group in &shared.taken {
                    group.0.store(u64::MAX, Ordering::Relaxed);
                }
            }
        }
        Watchdog { shared, timeout }
    }

    /// Runs `future` for at most the response timeout.
    pub(crate) async fn bound<F: Future>(&self, future: F) -> Result<F::Output, Elapsed> {
        let mut future = std::pin::pin!(future);
        let mut wait = Wait { watchdog: self, slot: None, timer: None };
        std::future::poll_fn(|cx| match future.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Ok(output)),
            Poll::Pending => wait.poll(cx).map(Err),
        })
        .await
    }
}

impl Drop for Watchdog {
    /// Unparks the thread, so that an idle one sees the watchdog gone and ends.
    fn drop(&mut self) {
        if let Some(thread) = self.shared.thread.get() {
            thread.unpark();
        }
    }
}

/// The thread: every tick, the tick, then a wake for each call past its
/// deadline; parked while no call waits.
fn watch(weak_shared: Weak<Shared>) {
    loop {
        let Some(resolution) = weak_shared.upgrade().map(|shared| shared.resolution) else { return };
        std::thread::sleep(resolution);
        let Some(shared) = weak_shared.upgrade() else { return };
        let tick = shared.now_tick();
        shared.tick.fetch_max(tick, Ordering::AcqRel);
        if shared.wake_late(tick) {
            continue;
        }
        // No call waits: park, unless one took a slot meanwhile. A call
        // takes its slot, then looks at `idle`; this sets `idle`, then
        // looks at the slots: one of the two sees the other (SeqCst).
        shared.idle.store(true, Ordering::SeqCst);
        if shared.taken.iter().any(|group| group.0.load(Ordering::SeqCst) != 0) {
            shared.idle.store(false, Ordering::SeqCst);
            continue;
        }
        // Not holding the watchdog while parked: dropping it unparks this.
        drop(shared);
        // Until a call clears `idle` (a wake-up may come without one).
        loop {
            std::thread::park();
            match weak_shared.upgrade().map(|shared| shared.idle.load(Ordering::SeqCst)) {
                None => return,
                Some(true) => continue,
                Some(false) => break,
            }
        }
    }
}

impl Shared {
    /// Ticks since `origin`, by the clock.
    fn now_tick(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos() / self.resolution.as_nanos()).unwrap_or(u64::MAX / 2)
    }

    /// Wakes every call past its deadline at `tick`; whether any call holds a slot.
    fn wake_late(&self, tick: u64) -> bool {
        let mut waiting = false;
        for (group, taken) in self.taken.iter().enumerate() {
            let mut bits = taken.0.load(Ordering::Acquire);
            waiting |= bits != 0;
            while bits != 0 {
                let slot = group * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let waker = {
                    let mut slot = self.slots[slot].lock().unwrap_or_else(PoisonError::into_inner);
                    // A slot given back (or taken again) since the bits were
                    // read has no waker, or a deadline ahead.
                    if slot.deadline <= tick {
                        slot.waker.take()
                    } else {
                        None
                    }
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
        }
        waiting
    }

    /// After a call took a slot: if the thread is idle, its tick is stale,
    /// so bring the tick up to the clock, then unpark the thread. (The tick
    /// first: a call that sees `idle` cleared sees the fresh tick too.)
    fn wake_if_idle(&self) {
        if self.idle.load(Ordering::SeqCst) {
            self.tick.fetch_max(self.now_tick(), Ordering::AcqRel);
            if self.idle.swap(false, Ordering::SeqCst) {
                if let Some(thread) = self.thread.get() {
                    thread.unpark();
                }
            }
        }
    }

    /// Takes a free slot, looking first in this thread's own group.
    fn take_slot(&self) -> Option<usize> {
        thread_local! {
            static GROUP: Cell<usize> = const { Cell::new(usize::MAX) };
        }
        static NEXT_GROUP: AtomicUsize = AtomicUsize::new(0);
        let first = GROUP.with(|group| {
            if group.get() == usize::MAX {
                group.set(NEXT_GROUP.fetch_add(1, Ordering::Relaxed) % GROUPS);
            }
            group.get()
        });
        for group in (first..GROUPS).chain(0..first) {
            let taken = &self.taken[group].0;
            let mut bits = taken.load(Ordering::Relaxed);
            while bits != u64::MAX {
                let bit = (!bits).trailing_zeros();
                match taken.compare_exchange_weak(bits, bits | 1 << bit, Ordering::SeqCst, Ordering::Relaxed) {
                    Ok(_) => return Some(group * 64 + bit as usize),
                    Err(now) => bits = now,
                }
            }
        }
        None
    }

    fn give_back(&self, slot: usize) {
        self.taken[slot / 64].0.fetch_and(!(1 << (slot % 64)), Ordering::Release);
    }
}

/// One call's registration: its slot (given back on drop), or its own timer
/// when no slot was free.
struct Wait<'w> {
    watchdog: &'w Watchdog,
    slot: Option<usize>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Wait<'_> {
    /// After the call's future said `Pending`: `Ready` once past the deadline.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Elapsed> {
        let shared = &*self.watchdog.shared;
        if let Some(timer) = &mut self.timer {
            return timer.as_mut().poll(cx).map(|()| Elapsed);
        }
        match self.slot {
            Some(index) => {
                let mut slot = shared.slots[index].lock().unwrap_or_else(PoisonError::into_inner);
                let in_time = shared.tick.load(Ordering::Acquire) < slot.deadline;
                match &mut slot.waker {
                    Some(waker) if in_time => waker.clone_from(cx.waker()),
                    // Past the deadline (the watchdog may have woken it already).
                    _ => return Poll::Ready(Elapsed),
                }
            }
            None => {
                let Some(index) = shared.take_slot() else {
                    let mut timer = Box::pin(tokio::time::sleep(self.watchdog.timeout));
                    let poll = timer.as_mut().poll(cx).map(|()| Elapsed);
                    self.timer = Some(timer);
                    return poll;
                };
                self.slot = Some(index);
                shared.wake_if_idle();
                let mut slot = shared.slots[index].lock().unwrap_or_else(PoisonError::into_inner);
                // One tick more than the timeout: the tick read here may be
                // nearly one old. Always ahead of the tick, so the watchdog,
                // which may miss a slot taken during its scan, finds it at
                // a later one.
                slot.deadline = shared.tick.load(Ordering::Acquire) + shared.ticks + 1;
                slot.waker = Some(cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.slot {
            let shared = &*self.watchdog.shared;
            let waker = shared.slots[index].lock().unwrap_or_else(PoisonError::into_inner).waker.take();
            drop(waker);
            shared.give_back(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pending at its first poll (waking itself), ready at the second: a
    /// call that waits once, as a call on the network does.
    struct PendingOnce(bool);

    impl Future for PendingOnce {
        type Output = u8;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u8> {
            if std::mem::replace(&mut self.0, true) {
                Poll::Ready(7)
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    fn free_slots(watchdog: &Watchdog) -> usize {
        watchdog.shared.taken.iter().map(|group| group.0.load(Ordering::Relaxed).count_zeros() as usize).sum()
    }

    #[tokio::test]
    async fn a_call_answered_in_time_keeps_its_answer_and_gives_its_slot_back() {
        let watchdog = Watchdog::new(Duration::from_secs(60));
        for _ in 0..3 * SLOTS {
            assert_eq!(watchdog.bound(PendingOnce(false)).await, Ok(7));
        }
        assert_eq!(watchdog.bound(std::future::ready(8)).await, Ok(8));
        assert_eq!(free_slots(&watchdog), SLOTS);
    }

    #[tokio::test]
    async fn a_dropped_call_gives_its_slot_back() {
        let watchdog = Watchdog::new(Duration::from_secs(60));
        let mut call = Box::pin(watchdog.bound(std::future::pending::<()>()));
        assert!(futures_poll_once(call.as_mut()).is_pending());
        assert_eq!(free_slots(&watchdog), SLOTS - 1);
        drop(call);
        assert_eq!(free_slots(&watchdog), SLOTS);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_never_answered_fails_after_the_timeout() {
        let timeout = Duration::from_millis(50);
        let watchdog = Watchdog::new(timeout);
        let started = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(10), watchdog.bound(std::future::pending::<()>())).await;
        assert_eq!(result, Ok(Err(Elapsed)), "the watchdog never woke the call");
        // Never early by more than one tick (the tick read at registration
        // may be nearly one old).
        assert!(started.elapsed() >= timeout - timeout / TICKS_PER_TIMEOUT, "failed after {:?}", started.elapsed());
        assert_eq!(free_slots(&watchdog), SLOTS);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_beyond_the_slots_still_fail_after_the_timeout() {
        let watchdog = Arc::new(Watchdog::new(Duration::from_millis(50)));
        let calls: Vec<_> = (0..SLOTS + 50)
            .map(|_| {
                let watchdog = watchdog.clone();
                tokio::spawn(async move { watchdog.bound(std::future::pending::<()>()).await })
            })
            .collect();
        for call in calls {
            let result = tokio::time::timeout(Duration::from_secs(10), call).await.expect("every call ends").unwrap();
            assert_eq!(result, Err(Elapsed));
        }
        assert_eq!(free_slots(&watchdog), SLOTS);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_watchdog_stops_ticking_and_the_next_call_still_gets_its_whole_timeout() {
        let timeout = Duration::from_millis(50);
        let watchdog = Watchdog::new(timeout);
        assert_eq!(watchdog.bound(PendingOnce(false)).await, Ok(7));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !watchdog.shared.idle.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the watchdog never went idle");
            std::thread::sleep(Duration::from_millis(1));
        }
        let parked_at = watchdog.shared.tick.load(Ordering::Acquire);
        // Twenty ticks' worth of time: a ticking thread would have counted them.
        std::thread::sleep(timeout * 2);
        assert_eq!(watchdog.shared.tick.load(Ordering::Acquire), parked_at, "an idle watchdog woke up to tick");

        // The stale tick must not shorten the next call's bound.
        let started = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(10), watchdog.bound(std::future::pending::<()>())).await;
        assert_eq!(result, Ok(Err(Elapsed)), "the unparked watchdog woke the call");
        assert!(started.elapsed() >= timeout - timeout / TICKS_PER_TIMEOUT, "failed after {:?}", started.elapsed());
    }

    fn futures_poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
        let waker = Waker::noop();
        future.poll(&mut Context::from_waker(waker))
    }
}
