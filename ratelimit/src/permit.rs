//! [`Permit`]: what a call holds while it runs. A concurrency limiter's
//! permit is a lease in the store, renewed while held and given back when
//! dropped; a rate limiter's permits are spent when taken, so its permit
//! holds nothing.

use crate::backend::{Answer, Call, CallKind, PermitId};
use crate::{AlgorithmKind, Decision, DenialReason, Error, Limiter, RateLimited};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// While a denied acquisition waits, it tries again at least this often
/// (a permit given back by another process sends no word).
const LONGEST_PAUSE: Duration = Duration::from_millis(250);
const FIRST_PAUSE: Duration = Duration::from_millis(5);

impl Limiter {
    pub(crate) fn permit_metrics(&self) -> &crate::observe::PermitMetrics {
        self.inner.permit_metrics.get_or_init(|| crate::observe::PermitMetrics::register(&self.inner.name))
    }

    /// Takes one permit for `key` and holds it until the [`Permit`] is
    /// dropped (or [`released`](Permit::release)), whatever way the code
    /// holding it ends: returned, panicked or cancelled.
    ///
    /// On a [`Policy::concurrency`](crate::Policy::concurrency) limiter at
    /// most `limit` permits of a key are held at once across every process
    /// sharing the store. A permit is a lease: renewed in the background
    /// while it is held (every third of the lease), so a process that dies
    /// holding one gives it back once the lease runs out. On any other
    /// policy a permit is spent when taken (as [`limit`](Self::limit) takes
    /// it) and the `Permit` gives nothing back.
    ///
    /// A denial is `Err(RateLimited)` at once (see
    /// [`acquire_wait`](Self::acquire_wait) to wait for a permit); a store
    /// failure is settled by the limiter's [`OnError`](crate::OnError): a
    /// call let through holds no permit of the store's (under
    /// `OnError::Local`, one of this process's memory).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, Policy, Store};
    ///
    /// let limiter = Limiter::new("reports", Policy::concurrency(1, "30s")?, &Store::memory());
    /// let permit = limiter.acquire("tenant-7").await.unwrap();
    /// assert!(permit.is_held());
    /// let busy = limiter.acquire("tenant-7").await.unwrap_err();
    /// assert_eq!((busy.decision().limit, busy.decision().remaining), (1, 0));
    /// assert_eq!(busy.retry_after(), None, "no time can be named: a permit frees when its holder ends");
    /// drop(permit);
    /// assert!(limiter.acquire("tenant-7").await.is_ok());
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, key: impl AsRef<[u8]>) -> Result<Permit, RateLimited> {
        self.acquire_by(key.as_ref(), 1, None).await.map(|(permit, _)| permit)
    }

    /// Like [`acquire`](Self::acquire), but a denial waits for a permit to
    /// be given back, for at most `max_wait` in total (`None`: no bound).
    /// A permit given back in this process wakes a waiter at once; one
    /// given back elsewhere, or whose lease ran out, is found by trying
    /// again, at least every 250 ms. On a rate policy it is
    /// [`wait`](Self::wait).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, Policy, Store};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::new("jobs", Policy::concurrency(1, "30s")?, &Store::memory());
    /// let held = limiter.acquire("user-1").await.unwrap();
    /// let waiter = tokio::spawn({
    ///     let limiter = limiter.clone();
    ///     async move { limiter.acquire_wait("user-1", Some(Duration::from_secs(5))).await.is_ok() }
    /// });
    /// tokio::task::yield_now().await;
    /// drop(held);
    /// assert!(waiter.await.unwrap(), "woken when the permit was given back");
    /// # Ok(()) }
    /// ```
    pub async fn acquire_wait(&self, key: impl AsRef<[u8]>, max_wait: Option<Duration>) -> Result<Permit, RateLimited> {
        self.acquire_by(key.as_ref(), 1, Some(max_wait)).await.map(|(permit, _)| permit)
    }

    /// [`acquire`](Self::acquire) of `cost` permits, waiting up to
    /// `wait`'s maximum when `wait` is given, and whether the store took
    /// them (what a refund may give back).
    pub(crate) async fn acquire_by(
        &self,
        key: &[u8],
        cost: u64,
        wait: Option<Option<Duration>>,
    ) -> Result<(Permit, bool), RateLimited> {
        if self.rule.policy.algorithm() != AlgorithmKind::Concurrency {
            // `limit_by`'s check awaited here, not inside its future: the
            // common call (a site's, a layer's) adds no future to the pipeline's.
            let (decision, taken) = match wait {
                None => self.enforce(key, cost, self.decide(key, cost, CallKind::Check).await)?,
                Some(max_wait) => self.wait_by(key, cost, max_wait).await?,
            };
            return Ok((Permit { decision, held: None }, taken));
        }
        let Some(max_wait) = wait else {
            return self.acquire_once(key, cost).await.map(|permit| (permit, false));
        };
        let deadline = max_wait.map(|max| tokio::time::Instant::now() + max);
        let mut pause = FIRST_PAUSE;
        loop {
            // Listening before asking, so a release between the two is not missed.
            let mut released = std::pin::pin!(self.inner.released.notified());
            released.as_mut().enable();
            let denied = match self.acquire_once(key, cost).await {
                Err(denied) if denied.decision().limit >= cost && denied.reason() == DenialReason::Limited => denied,
                done => return done.map(|permit| (permit, false)),
            };
            let now = tokio::time::Instant::now();
            let wake = deadline.map_or(now + pause, |deadline| deadline.min(now + pause));
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(denied);
            }
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep_until(wake) => pause = (pause * 2).min(LONGEST_PAUSE),
            }
        }
    }

    /// One try at a concurrency permit.
    async fn acquire_once(&self, key: &[u8], cost: u64) -> Result<Permit, RateLimited> {
        let id = PermitId::unique();
        let kind = CallKind::Acquire(id);
        let mut unanswered = Unanswered { limiter: self, key, id, cost, armed: cost > 0 };
        let decided = self.decide(key, cost, kind).await;
        unanswered.armed = decided.is_err();
        drop(unanswered);
        let (decision, on) = match decided {
            Ok(decision) => (decision, Holder::Store),
            Err(error) => match self.on_error.settle(self, key, cost, kind, &error) {
                Ok(decision) => (decision, Holder::Local),
                Err(denied) if self.is_dry_run() => {
                    crate::dry_run::would_have_denied(self);
                    return Ok(Permit { decision: denied.decision().clone(), held: None });
                }
                Err(denied) => return Err(denied),
            },
        };
        if !decision.allowed {
            if self.is_dry_run() {
                crate::dry_run::would_have_denied(self);
                return Ok(Permit { decision, held: None });
            }
            return Err(self.denial(key, decision, false));
        }
        // Under OnError::Allow nothing was taken anywhere; cost 0 holds nothing.
        let took = cost > 0 && (on == Holder::Store || self.on_error == crate::OnError::Local);
        let held = took.then(|| Held::start(self.clone(), key, id, cost, on));
        Ok(Permit { decision, held })
    }
}

/// Which store holds a permit: the limiter's, or this process's memory
/// (`OnError::Local` while the store could not answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Store,
    Local,
}

/// A permit taken by [`Limiter::acquire`]: held until dropped.
///
/// Dropping it gives it back: at once on a store in this process, else by
/// a task on the current tokio runtime (with none, its lease runs out). A
/// permit is given back at most once, and a renewal never takes again a
/// permit whose lease ended: if a renewal comes too late (the process was
/// stopped, the store unreachable for a whole lease), the permit is lost,
/// [`is_held`](Self::is_held) turns false, `redlimit_permit_leases_lost_total`
/// counts it and a WARN says so.
pub struct Permit {
    decision: Decision,
    held: Option<Held>,
}

/// A permit the store holds, and its renewals.
struct Held {
    lease: Arc<Lease>,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

/// What the store knows a held permit by.
struct Lease {
    limiter: Limiter,
    key: Box<[u8]>,
    id: PermitId,
    cost: u64,
    on: Holder,
    /// A renewal found the lease ended.
    lost: AtomicBool,
}

impl Permit {
    /// The decision that granted it.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// Whether the store holds this permit for its holder: false for a
    /// rate policy's (spent when taken), a call let through by `on_error`
    /// or a dry run, and a permit whose lease ended before it was renewed.
    pub fn is_held(&self) -> bool {
        self.held.as_ref().is_some_and(|held| !held.lease.lost.load(Ordering::Relaxed))
    }

    /// Gives the permit back now and waits for the store to take it:
    /// `Err` when it could not (then its lease runs out instead).
    pub async fn release(mut self) -> Result<(), Error> {
        match self.held.take() {
            Some(held) => held.lease.clone().release().await,
            None => Ok(()),
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            held.give_back();
        }
    }
}

/// What an annotated function's body holds while it runs: a [`Permit`]
/// without its decision, which generated code never reads (one word to
/// move instead of a whole decision).
#[doc(hidden)]
#[derive(Default)]
pub struct Holding(Option<Held>);

impl Holding {
    pub(crate) fn of(mut permit: Permit) -> Holding {
        Holding(permit.held.take())
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        if let Some(held) = self.0.take() {
            held.give_back();
        }
    }
}

impl fmt::Debug for Holding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Holding").field(&self.0.is_some()).finish()
    }
}

/// An acquisition the store has not answered yet: if it is dropped
/// (cancelled) or its answer is lost (a timeout), the store may still hold
/// the permit with no `Permit` to give it back, so it is given back here.
/// Releasing a permit not held gives nothing back, so this is safe either
/// way; on the connection the acquisition went by, the release follows it.
struct Unanswered<'a> {
    limiter: &'a Limiter,
    key: &'a [u8],
    id: PermitId,
    cost: u64,
    armed: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.armed {
            let (limiter, key) = (self.limiter.clone(), self.key.into());
            // Never counted as held: nothing to count as given back.
            let lost = AtomicBool::new(true);
            Arc::new(Lease { limiter, key, id: self.id, cost: self.cost, on: Holder::Store, lost }).give_back();
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("decision", &self.decision).field("held", &self.is_held()).finish()
    }
}

impl Held {
    /// Stops the renewals and gives the permit back.
    fn give_back(self) {
        let lease = self.lease.clone();
        drop(self);
        lease.give_back();
    }

    /// A permit just taken, and its renewals started.
    fn start(limiter: Limiter, key: &[u8], id: PermitId, cost: u64, on: Holder) -> Held {
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

    async fn release(self: Arc<Self>) -> Result<(), Error> {
        let outcome = self.ask(CallKind::Release(self.id)).await;
        self.given_back(outcome)
    }

    /// Gives the permit back without waiting: at once on a store in this
    /// process, else on a task of the current runtime (with none, the lease
    /// runs out), which tries again while the store fails (its breaker
    /// open, a timeout) until a whole lease has passed: by then it has ended.
    fn give_back(self: Arc<Self>) {
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
