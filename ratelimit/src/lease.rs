//! A held permit's lease: what the store knows it by, its renewals every
//! third of the lease, and how it is given back (at once on a store in this
//! process, else by a task that tries again while the store fails).

use crate::backend::{Answer, Call, CallKind, PermitId};
use crate::{Error, Limiter};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// While a denied acquisition waits, it tries again at least this often
/// (a permit given back by another process sends no word).
pub(crate) const LONGEST_PAUSE: Duration = Duration::from_millis(250);
pub(crate) const FIRST_PAUSE: Duration = Duration::from_millis(5);

impl Limiter {
    pub(crate) fn permit_metrics(&self) -> &crate::observe::PermitMetrics {
        self.inner.permit_metrics.get_or_init(|| crate::observe::PermitMetrics::register(&self.inner.name))
    }
}

/// Which store holds a permit: the limiter's, or this process's memory
/// (`OnError::Local` while the store could not answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    Store,
    Local,
}

/// A permit the store holds, and its renewals.
pub(crate) struct Held {
    pub(crate) lease: Arc<Lease>,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

/// What the store knows a held permit by.
pub(crate) struct Lease {
    pub(crate) limiter: Limiter,
    pub(crate) key: Box<[u8]>,
    pub(crate) id: PermitId,
    pub(crate) cost: u64,
    pub(crate) on: Holder,
    /// A renewal found the lease ended.
    pub(crate) lost: AtomicBool,
}

impl Held {
    /// Stops the renewals and gives the permit back.
    pub(crate) fn give_back(self) {
        let lease = self.lease.clone();
        drop(self);
        lease.give_back();
    }

    /// A permit just taken, and its renewals started.
    pub(crate) fn start(limiter: Limiter, key: &[u8], id: PermitId, cost: u64, on: Holder) -> Held {
        limiter.permit_metrics().taken();
        let lease = Arc::new(Lease { limiter, key: key.into(), id, cost, on, lost: AtomicBool::new(false) });
        let renewal = tokio::runtime::Handle::try_current().ok().map(|runtime| runtime.spawn(lease.clone().renewals()));
        Held { lease, renewal }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
    }
}

impl Lease {
    /// One call about this permit to the store that holds it.
    fn send(&self, kind: CallKind) -> Answer<'_> {
        let (limiter, clock) = (&self.limiter, &*self.limiter.inner.store.clock);
        match self.on {
            Holder::Store => limiter.rule.bound.decide_by(&self.key, self.cost, kind, clock),
            Holder::Local => {
                let call = Call { cost: self.cost, kind, now_us: clock.now_us() };
                Answer::Now(Ok(limiter.local().decide_now(&self.key, call)))
            }
        }
    }

    async fn ask(&self, kind: CallKind) -> Result<crate::backend::Outcome, Error> {
        match self.send(kind) {
            Answer::Now(outcome) => outcome,
            Answer::Later(answer) => answer.await,
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
    pub(crate) fn give_back(self: Arc<Self>) {
        if let Answer::Now(Ok(outcome)) = self.send(CallKind::Release(self.id)) {
            drop(self.given_back(Ok(outcome)));
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let lease = self.limiter.rule.policy.lease().unwrap_or(Duration::from_secs(30));
            let give_up = tokio::time::Instant::now() + lease;
            let mut pause = FIRST_PAUSE;
            loop {
                let outcome = self.ask(CallKind::Release(self.id)).await;
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
    fn given_back(&self, outcome: Result<crate::backend::Outcome, Error>) -> Result<(), Error> {
        if !self.lost.swap(true, Ordering::Relaxed) {
            self.limiter.permit_metrics().given_back();
        }
        self.limiter.inner.released.notify_waiters();
        outcome.map(drop).inspect_err(crate::observe::store_error)
    }

    /// Renews the lease every third of it, until the permit is given back
    /// (the task is aborted) or a renewal finds the lease ended.
    async fn renewals(self: Arc<Self>) {
        let lease = self.limiter.rule.policy.lease().unwrap_or(Duration::from_secs(30));
        let every = (lease / 3).max(Duration::from_millis(1));
        loop {
            tokio::time::sleep(every).await;
            match self.ask(CallKind::Renew(self.id)).await {
                Ok(outcome) if !outcome.allowed => {
                    if !self.lost.swap(true, Ordering::Relaxed) {
                        self.limiter.permit_metrics().lost();
                    }
                    tracing::warn!(target: "redlimit", limiter = &*self.limiter.inner.name,
                        "a concurrency permit's lease ended before it was renewed (the process or the store was \
                         stalled for a whole lease): its call runs on without it");
                    return;
                }
                // A failed renewal is tried again: a lease outlasts a few.
                _ => {}
            }
        }
    }
}
