//! [`Permit`]: what a call holds while it runs. A concurrency limiter's
//! permit is a lease in the store, renewed while held and given back when
//! dropped; a rate limiter's permits are spent when taken, so its permit
//! holds nothing.

use crate::backend::{CallKind, PermitId};
use crate::lease::{Held, Holder, Lease, FIRST_PAUSE, LONGEST_PAUSE};
use crate::{AlgorithmKind, Decision, DenialReason, Error, Limiter, RateLimited};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Limiter {
    /// Takes one permit for `key` and holds it until the [`Permit`] is
    /// dropped (or [`released`](Permit::release)), whatever way the code
    /// holding it ends: returned, panicked or cancelled.
    ///
    /// On a [`Policy::concurrency`](crate::Policy::concurrency) limiter at
    /// most `limit` permits of a key are held at once across every process
    /// sharing the store. A permit is a lease: renewed in the background
    /// while it is held (every third of the lease, and again soon after a
    /// failure), so a process that dies holding one gives it back once the
    /// lease runs out ([`Permit`] says what a holder that lost its lease is
    /// told). On any other
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
        self.acquire_as(key, cost, wait, |decision| Permit { decision, held: None }, |permit| permit).await
    }

    /// [`acquire_by`](Self::acquire_by) for an annotated function, whose
    /// body keeps only the lease: the decision is shown to `seen` by
    /// reference, and a rate policy's never becomes a `Permit`.
    pub(crate) async fn acquire_holding(
        &self,
        key: &[u8],
        cost: u64,
        wait: Option<Option<Duration>>,
        seen: impl Fn(&Decision),
    ) -> Result<(Holding, bool), RateLimited> {
        let spent = |decision: Decision| {
            seen(&decision);
            Holding::default()
        };
        let leased = |permit: Permit| {
            seen(permit.decision());
            Holding::of(permit)
        };
        self.acquire_as(key, cost, wait, spent, leased).await
    }

    /// The one acquisition both entries share: a rate policy's decision is
    /// made into the caller's `T` by `spent`, a concurrency permit by `leased`.
    async fn acquire_as<T>(
        &self,
        key: &[u8],
        cost: u64,
        wait: Option<Option<Duration>>,
        spent: impl FnOnce(Decision) -> T,
        leased: impl FnOnce(Permit) -> T,
    ) -> Result<(T, bool), RateLimited> {
        if self.rule.policy.algorithm() == AlgorithmKind::Concurrency {
            // Boxed: a lease costs more than the box, and its waiting state
            // would otherwise size the future of every rate policy's call.
            let (permit, taken) = Box::pin(self.acquire_lease(key, cost, wait)).await?;
            return Ok((leased(permit), taken));
        }
        // The check awaited here, not inside `limit_by`'s future: the common
        // call (a site's, a layer's) adds no future to the pipeline's.
        let (decision, taken) = match wait {
            None => self.enforce(key, cost, self.decide(key, cost, CallKind::Check).await)?,
            Some(max_wait) => self.wait_by(key, cost, max_wait).await?,
        };
        Ok((spent(decision), taken))
    }

    /// [`acquire_by`](Self::acquire_by) under a concurrency policy: a lease
    /// of `cost` permits, waited for when `wait` is given.
    async fn acquire_lease(
        &self,
        key: &[u8],
        cost: u64,
        wait: Option<Option<Duration>>,
    ) -> Result<(Permit, bool), RateLimited> {
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
        // The releases of this name and key begun before (a permit just
        // dropped) reach the store first: a caller's own is never in its way.
        self.inner.store.releasing.settled(&self.inner.name, key).await;
        let id = PermitId::unique();
        let kind = CallKind::Acquire(id);
        let mut unanswered = Unanswered { limiter: self, key, id, cost, armed: cost > 0 };
        let asked_at = tokio::time::Instant::now();
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
        let held = took.then(|| Held::start(self.clone(), key, id, cost, on, asked_at));
        Ok(Permit { decision, held })
    }
}

/// What a call holds while it runs ([`Limiter::acquire`]).
///
/// Dropping it gives it back: at once on a store in this process, else by
/// a task on the current tokio runtime (with none, its lease runs out),
/// whose first try the store's next
/// acquisition of the same limiter name and key waits for, so the holder's
/// next call never finds its own permit held. A permit is given back at
/// most once, and a renewal never takes again a permit whose lease ended.
///
/// Its lease is renewed every third of it; a renewal that fails is tried
/// again soon (pauses from 5 ms, at most a twentieth of the lease or
/// 250 ms). The lease is counted from when the last answered renewal was
/// sent, and a permit outlives any outage of the store after which one
/// renewal is answered before that lease ends: one starts at most a pause
/// plus the longer of the store's response timeout and its breaker's retry
/// interval after the outage ends. A renewal being due every third of the
/// lease, that is any outage shorter than two thirds of the lease less that
/// and one round trip. Should no renewal be
/// answered in time (the process or the store stalled for the rest of the
/// lease, the store restarted empty or was flushed), the permit is lost:
/// [`is_lost`](Self::is_lost) turns true and [`is_held`](Self::is_held)
/// false, `redlimit_permit_leases_lost_total` counts it and a WARN says so.
/// Outside a tokio runtime a permit is never renewed: it holds one lease.
pub struct Permit {
    decision: Decision,
    held: Option<Held>,
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
        self.held.as_ref().is_some_and(|held| !held.lease.lost.load(Ordering::Relaxed) && !held.lease.is_lost())
    }

    /// Whether this permit's lease was lost while held: a renewal found the
    /// store no longer had it (it ran out while this process or the store
    /// stalled, the store restarted empty or was flushed), or no renewal was
    /// answered before the lease ended, counted from when the last answered
    /// one was sent. From then on the store may give the permit to another
    /// caller, so more than `limit` calls may run: a call that must not run
    /// beside another should stop. A permit taken outside a tokio runtime is
    /// never renewed, and is lost once its first lease ends. Never true for
    /// a permit that holds nothing (a rate policy's, a call let through).
    ///
    /// `redlimit_permit_leases_lost_total` counts losses, and each is logged
    /// (WARN). [`lost`](Self::lost) waits for it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, Policy, Store};
    ///
    /// let limiter = Limiter::new("exports", Policy::concurrency(1, "30s")?, &Store::memory());
    /// let permit = limiter.acquire("tenant-7").await.unwrap();
    /// assert!(!permit.is_lost() && permit.is_held());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.held.as_ref().is_some_and(|held| held.lease.is_lost())
    }

    /// Waits until the lease is lost ([`is_lost`](Self::is_lost)); for a
    /// permit that holds nothing, forever. For a body that must stop when
    /// it no longer holds its permit:
    /// `tokio::select! { done = work() => done, () = permit.lost() => give_up() }`.
    pub async fn lost(&self) {
        match &self.held {
            Some(held) => held.lease.lost().await,
            None => std::future::pending().await,
        }
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

    /// The lease it holds, if any (a concurrency policy's).
    pub(crate) fn lease(&self) -> Option<&Arc<Lease>> {
        self.0.as_ref().map(|held| &held.lease)
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
            // Never counted as held: nothing to count as given back.
            crate::lease::unanswered(self.limiter.clone(), self.key, self.id, self.cost).give_back();
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("decision", &self.decision).field("held", &self.is_held()).finish()
    }
}
