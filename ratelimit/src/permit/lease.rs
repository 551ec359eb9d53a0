//! A held permit's lease: what the store knows it by, its renewals (every
//! third of the lease, again soon after a failure), how its holder learns
//! it was lost, and how it is given back (at once on a store in this
//! process, else by a task that tries again while the store fails, which
//! the store's next acquisition of that name and key waits for: `releasing.rs`).

use crate::backend::Answer;
use crate::call::{Call, CallKind, PermitId};
use crate::decision::Decision;
use crate::error::Error;
use crate::Limiter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
// Tokio's: renewals keep a runtime's clock (paused in tests); with no runtime it is the system's.
use tokio::time::Instant;

/// While a denied acquisition waits, it tries again at least this often
/// (a permit given back by another process sends no word).
pub(crate) const LONGEST_PAUSE: Duration = Duration::from_millis(250);
pub(crate) const FIRST_PAUSE: Duration = Duration::from_millis(5);

/// The longest pause between tries of a failed renewal, as a share of the
/// lease: a renewal is tried again at least twenty times before its lease
/// ends, so an outage that ends in time is found over in time.
const RETRIES_PER_LEASE: u32 = 20;

// The shortest lease (the grammar's) is the one whose retries still start 5 ms apart.
const _: () = assert!(FIRST_PAUSE.as_micros() * RETRIES_PER_LEASE as u128 == redlimit_grammar::MIN_LEASE_US as u128);

impl Limiter {
    pub(crate) fn permit_metrics(&self) -> &crate::observe::PermitMetrics {
        self.inner.permit_metrics.get_or_init(|| crate::observe::PermitMetrics::register(&self.inner.name))
    }

    /// The lease of this limiter's policy.
    fn lease(&self) -> Duration {
        self.rule.policy.lease().unwrap_or(Duration::from_secs(30))
    }
}

/// What the store knows a held permit by, shared by its holder's
/// [`Ticket`](crate::permit::Ticket), its renewals and its release.
pub(crate) struct Lease {
    pub(crate) limiter: Limiter,
    pub(crate) key: Box<[u8]>,
    pub(crate) id: PermitId,
    pub(crate) cost: u64,
    /// Held by this process's memory (`OnError::Local`, while the store
    /// could not answer), not by the limiter's store.
    local: bool,
    /// No longer counted as held: given back, or its lease lost.
    pub(crate) lost: AtomicBool,
    /// The lease ended while its holder held it (the store no longer had
    /// it, or no renewal was answered before it ended).
    ended: AtomicBool,
    ended_signal: tokio::sync::Notify,
    /// Taken outside a tokio runtime, so never renewed: the lease holds
    /// until then (at the latest), and no longer.
    unrenewed_until: Option<Instant>,
}

/// A held lease: its state, and the task renewing it.
pub(crate) type Renewed = (Arc<Lease>, Option<tokio::task::JoinHandle<()>>);

impl Lease {
    /// A permit just taken by a call sent at `asked_at`, and its renewals
    /// started; with no tokio runtime to renew it on, it holds one lease.
    pub(crate) fn start(call: Call<'_>, limiter: Limiter, id: PermitId, local: bool, asked_at: Instant) -> Renewed {
        limiter.permit_metrics().taken();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let unrenewed_until = match runtime {
            Some(_) => None,
            None => {
                warn_never_renewed(&limiter);
                Some(asked_at + limiter.lease())
            }
        };
        let lease = Lease::new(call, limiter, id, local, unrenewed_until);
        let renewal = runtime.map(|runtime| runtime.spawn(lease.clone().renewals(asked_at)));
        (lease, renewal)
    }

    /// A permit an acquisition may have taken, whose answer never came: never
    /// counted as held, and given back all the same (releasing a permit not
    /// held gives nothing back).
    pub(crate) fn unanswered(call: Call<'_>, limiter: Limiter, id: PermitId) -> Arc<Lease> {
        let lease = Lease::new(call, limiter, id, false, None);
        lease.lost.store(true, Ordering::Relaxed);
        lease
    }

    fn new(
        call: Call<'_>,
        limiter: Limiter,
        id: PermitId,
        local: bool,
        unrenewed_until: Option<Instant>,
    ) -> Arc<Lease> {
        Arc::new(Lease {
            limiter,
            key: call.key.into(),
            id,
            cost: call.cost,
            local,
            lost: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            ended_signal: tokio::sync::Notify::new(),
            unrenewed_until,
        })
    }
}

/// Once per process: a permit taken outside a tokio runtime is never renewed.
fn warn_never_renewed(limiter: &Limiter) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(target: "redlimit", limiter = &*limiter.inner.name,
            "a concurrency permit was taken outside a tokio runtime: it is never renewed, so it holds for one lease \
             and then reports itself lost (Permit::is_lost)");
    }
}

/// A release of `lease`'s key on its way: the store's next acquisition of
/// that name and key waits until it is dropped (answered, failed or abandoned).
struct PendingRelease {
    lease: Arc<Lease>,
    number: u64,
}

impl Drop for PendingRelease {
    fn drop(&mut self) {
        let limiter = &self.lease.limiter;
        limiter.inner.store.releasing.end(&limiter.inner.name, &self.lease.key, self.number);
    }
}

impl Lease {
    /// One call about this permit to the store that holds it.
    fn send(&self, kind: CallKind) -> Answer<'_> {
        let (limiter, clock) = (&self.limiter, &*self.limiter.inner.store.clock);
        let call = Call { key: &self.key, cost: self.cost, kind };
        match self.local {
            false => limiter.rule.bound.decide(call, clock),
            true => Answer::Now(Ok(limiter.decide_locally(call))),
        }
    }

    async fn ask(&self, kind: CallKind) -> Result<Decision, Error> {
        match self.send(kind) {
            Answer::Now(outcome) => outcome,
            Answer::Later(answer) => answer.await,
        }
    }

    /// Whether the lease is known to have ended while held: the store no
    /// longer had it, no renewal was answered before it ended, or (never
    /// renewed, outside a runtime) it ran out.
    pub(crate) fn is_lost(&self) -> bool {
        self.ended.load(Ordering::Acquire) || self.unrenewed_until.is_some_and(|until| Instant::now() >= until)
    }

    /// Waits until [`is_lost`](Self::is_lost).
    pub(crate) async fn lost(self: &Arc<Self>) {
        if let Some(until) = self.unrenewed_until.filter(|&until| Instant::now() < until) {
            if tokio::runtime::Handle::try_current().is_ok() {
                return tokio::time::sleep_until(until).await;
            }
            // No timer without a runtime: a thread wakes it when the lease ends.
            let lease = self.clone();
            std::thread::spawn(move || {
                std::thread::sleep(until.into_std().saturating_duration_since(std::time::Instant::now()));
                lease.ended_signal.notify_waiters();
            });
        }
        loop {
            let mut ended = std::pin::pin!(self.ended_signal.notified());
            ended.as_mut().enable();
            if self.is_lost() {
                return;
            }
            ended.await;
        }
    }

    pub(crate) async fn release(self: Arc<Self>) -> Result<(), Error> {
        let outcome = self.ask(CallKind::Release(self.id)).await;
        self.given_back(outcome)
    }

    /// Gives the permit back without waiting: at once on a store in this
    /// process, else on a task of the current runtime (with none, the lease
    /// runs out), which tries again while the store fails (its breaker
    /// open, a timeout) until a whole lease has passed: by then it has ended.
    /// Until the first try is answered, the store's acquisitions of the
    /// name and key wait for it, so the holder's next call never finds it held.
    pub(crate) fn give_back(self: Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            if let Answer::Now(outcome) = self.send(CallKind::Release(self.id)) {
                drop(self.given_back(outcome));
            }
            return;
        };
        if let Answer::Now(Ok(outcome)) = self.send(CallKind::Release(self.id)) {
            drop(self.given_back(Ok(outcome)));
            return;
        }
        // Begun here, in the drop, so an acquisition that follows it waits.
        let number = self.limiter.inner.store.releasing.begin(&self.limiter.inner.name, &self.key);
        let mut first = Some(PendingRelease { lease: self.clone(), number });
        runtime.spawn(async move {
            let give_up = tokio::time::Instant::now() + self.limiter.lease();
            let mut pause = FIRST_PAUSE;
            loop {
                let outcome = self.ask(CallKind::Release(self.id)).await;
                drop(first.take());
                if outcome.is_ok() || tokio::time::Instant::now() + pause >= give_up {
                    drop(self.given_back(outcome));
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
        });
    }

    /// A release answered: waiters in this process are told, the gauge lowered.
    fn given_back(&self, outcome: Result<Decision, Error>) -> Result<(), Error> {
        if !self.lost.swap(true, Ordering::Relaxed) {
            self.limiter.permit_metrics().given_back();
        }
        self.limiter.inner.released.notify_waiters();
        outcome.map(drop).inspect_err(crate::observe::store_error)
    }

    /// The lease ended while held: its holder is told, the gauge lowered,
    /// the loss counted and logged.
    fn end(&self, why: &str) {
        self.ended.store(true, Ordering::Release);
        self.ended_signal.notify_waiters();
        if !self.lost.swap(true, Ordering::Relaxed) {
            self.limiter.permit_metrics().lost();
        }
        tracing::warn!(target: "redlimit", limiter = &*self.limiter.inner.name,
            "a concurrency permit's lease was lost ({why}): its call runs on without it, and Permit::is_lost says so");
    }

    /// Renews the lease every third of it, until the permit is given back
    /// (the task is aborted) or the lease is lost. A failed renewal is tried
    /// again soon (pauses from 5 ms, at most a twentieth of the lease or
    /// 250 ms), up to the time the lease ends counted from when the last
    /// answered renewal was sent (`renewed_at`): the store ran it no
    /// earlier, so its lease ends no earlier.
    async fn renewals(self: Arc<Self>, mut renewed_at: Instant) {
        let lease = self.limiter.lease();
        let every = lease / 3;
        let longest_pause = (lease / RETRIES_PER_LEASE).clamp(Duration::from_millis(1), LONGEST_PAUSE);
        loop {
            tokio::time::sleep_until(renewed_at + every).await;
            let ends = renewed_at + lease;
            let mut pause = FIRST_PAUSE.min(longest_pause);
            loop {
                let sent = Instant::now();
                if sent >= ends {
                    return self.end("no renewal was answered before it ended: the store or this process stalled");
                }
                match tokio::time::timeout_at(ends, self.ask(CallKind::Renew(self.id))).await {
                    Ok(Ok(outcome)) if outcome.allowed => {
                        renewed_at = sent;
                        break;
                    }
                    Ok(Ok(_)) => {
                        return self.end("the store no longer held it: it ran out, or the store lost its data");
                    }
                    Ok(Err(_)) | Err(_) => {}
                }
                let now = Instant::now();
                tokio::time::sleep_until(ends.min(now + pause)).await;
                pause = (pause * 2).min(longest_pause);
            }
        }
    }
}
