//! [`Permit`]: what an admitted call holds while it runs. Its [`Ticket`] is
//! what it gives back: a concurrency policy's lease in the store (renewed
//! while held, given back when dropped), and, when its caller refunds
//! (`refund_on`), the permits a rate policy took. [`Limiter::admit`] is
//! the one way a call becomes a permit: `acquire`, annotated functions and
//! the HTTP layer all go through it.

pub(crate) mod lease;
pub(crate) mod lost;

use crate::backend::BoxFuture;
use crate::call::{Call, CallKind, PermitId, Refunded};
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::enforcement::OnLimit;
use crate::limiter::on_error::OnError;
use crate::limiter::pipeline::Deciding;
use crate::permit::lease::{Lease, Renewed, FIRST_PAUSE, LONGEST_PAUSE};
use crate::rate_limited::{DenialReason, RateLimited};
use crate::Limiter;
use redlimit_grammar::AlgorithmKind;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
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
    /// failure is settled by the limiter's [`OnError`]: a
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
        self.admit(Call::check(key.as_ref(), 1), OnLimit::Error).await
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
        self.admit(Call::check(key.as_ref(), 1), OnLimit::Wait(max_wait)).await
    }

    /// Admits `call` (a check of its cost), or says why not: the one way a
    /// call becomes a [`Permit`], for `acquire`, annotated functions and
    /// the HTTP layer. A denial waits under `OnLimit::Wait`; a store failure
    /// is settled by `on_error`; a dry run lets a denial through. A rate
    /// policy's permits are spent; a concurrency policy's are leased.
    ///
    /// The common call (a rate policy, a denial returned) is the pipeline's
    /// [`Deciding`] and its answer made into a permit in the same poll, so a
    /// store in this process admits in one poll; a lease or a wait is a
    /// future of its own, boxed, since its state is larger than the call's.
    #[inline]
    pub(crate) fn admit<'a>(&'a self, call: Call<'a>, on_limit: OnLimit) -> Admitting<'a> {
        if self.decides_only(on_limit) {
            return Admitting::Deciding { call, deciding: self.decide(call.key, call.cost, CallKind::Check) };
        }
        match on_limit {
            OnLimit::Wait(max_wait) if self.rule.policy.algorithm() != AlgorithmKind::Concurrency => {
                Admitting::Other(Box::pin(async move {
                    let (decision, taken) = self.wait_taken(call, max_wait).await?;
                    Ok(self.permit(call, decision, taken, None))
                }))
            }
            _ => Admitting::Other(Box::pin(self.leased(call, on_limit))),
        }
    }

    /// Whether admitting a call is deciding it and no more: a rate policy's
    /// call whose denial is returned, not waited out.
    #[inline]
    pub(crate) fn decides_only(&self, on_limit: OnLimit) -> bool {
        on_limit == OnLimit::Error && self.rule.policy.algorithm() != AlgorithmKind::Concurrency
    }

    /// What a rate policy's decision, enforced, gives its caller: a permit
    /// (its permits spent), or the denial.
    #[inline]
    pub(crate) fn admitted(&self, call: Call<'_>, decided: Result<Decision, Error>) -> Result<Permit, RateLimited> {
        let (decision, taken) = match decided {
            // An admission is the common answer: no `enforce` to move it through.
            Ok(decision) if decision.allowed => (decision, true),
            decided => self.enforce(call, decided)?,
        };
        Ok(self.permit(call, decision, taken, None))
    }

    /// The permit of an admitted call: its decision and its ticket.
    #[inline]
    fn permit(&self, call: Call<'_>, decision: Decision, taken: bool, lease: Option<Renewed>) -> Permit {
        let ticket = self.ticket(call, &decision, taken, lease);
        Permit { decision, ticket, taken }
    }

    /// What an admitted call gives back: its lease, and, when the limiter's
    /// caller refunds and the store took something, what it took.
    #[inline]
    pub(crate) fn ticket(&self, call: Call<'_>, decision: &Decision, taken: bool, lease: Option<Renewed>) -> Ticket {
        // A cost of 0 too: a settlement may charge it all.
        let refund = match self.enforcement.refunds && taken {
            true => Some(self.kept_for_refund(call, decision)),
            false => None,
        };
        Ticket { lease, refund }
    }

    /// A reservation's permit ([`Limiter::reserve`]): it keeps what the
    /// store took, to settle, whatever the limiter's refunds say (and its
    /// estimate of 0 too: a settlement charges it all).
    pub(crate) fn reserved(&self, call: Call<'_>, mut permit: Permit) -> Permit {
        if permit.taken && permit.ticket.refund.is_none() {
            permit.ticket.refund = Some(self.kept_for_refund(call, &permit.decision));
        }
        permit
    }

    /// What a refund of `call`, answered by `decision`, gives back.
    #[cold]
    fn kept_for_refund(&self, call: Call<'_>, decision: &Decision) -> Box<Refund> {
        let of = Refunded::of(decision);
        Box::new(Refund { limiter: self.clone(), key: call.key.into(), cost: call.cost, of })
    }

    /// [`admit`](Self::admit) under a concurrency policy: a lease of the
    /// call's cost, waited for under `OnLimit::Wait`.
    async fn leased(&self, call: Call<'_>, on_limit: OnLimit) -> Result<Permit, RateLimited> {
        let OnLimit::Wait(max_wait) = on_limit else {
            return self.lease_once(call).await;
        };
        let deadline = max_wait.map(|max| tokio::time::Instant::now() + max);
        let mut pause = FIRST_PAUSE;
        loop {
            // Listening before asking, so a release between the two is not missed.
            let mut released = std::pin::pin!(self.inner.released.notified());
            released.as_mut().enable();
            let denied = match self.lease_once(call).await {
                Err(denied) if denied.decision().limit >= call.cost && denied.reason() == DenialReason::Limited => {
                    denied
                }
                done => return done,
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
    async fn lease_once(&self, call: Call<'_>) -> Result<Permit, RateLimited> {
        // The releases of this name and key begun before (a permit just
        // dropped) reach the store first: a caller's own is never in its way.
        self.inner.store.releasing.settled(&self.inner.name, call.key).await;
        let id = PermitId::unique();
        let call = call.with_kind(CallKind::Acquire(id));
        // Until answered, the store may hold the permit with no `Permit` to
        // give it back: dropped (cancelled) or failed, this gives it back,
        // on the connection the acquisition went by, after it.
        let mut unanswered = Ticket::default();
        if call.cost > 0 {
            unanswered.lease = Some((Lease::unanswered(call, self.clone(), id), None));
        }
        let asked_at = tokio::time::Instant::now();
        let decided = self.decide(call.key, call.cost, call.kind).await;
        if decided.is_ok() {
            unanswered.lease = None;
        }
        drop(unanswered);
        let (decision, taken) = self.enforce(call, decided)?;
        // Under OnError::Allow nothing was taken anywhere; cost 0 holds nothing.
        let local = !taken && self.enforcement.on_error == OnError::Local;
        let held = decision.allowed && call.cost > 0 && (taken || local);
        let lease = held.then(|| Lease::start(call, self.clone(), id, local, asked_at));
        Ok(self.permit(call, decision, taken, lease))
    }
}

/// [`Limiter::admit`]'s future.
// The large variant is the common one: boxing it would allocate per call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Admitting<'a> {
    /// A rate policy's check, admitted as soon as the pipeline answers.
    Deciding { call: Call<'a>, deciding: Deciding<'a, &'a [u8]> },
    /// A lease, or a wait for a permit.
    Other(BoxFuture<'a, Result<Permit, RateLimited>>),
}

impl Future for Admitting<'_> {
    type Output = Result<Permit, RateLimited>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Admitting::Deciding { call, deciding } => {
                let decided = ready!(Pin::new(&mut *deciding).poll(cx));
                Poll::Ready(deciding.limiter().admitted(*call, decided))
            }
            Admitting::Other(other) => other.as_mut().poll(cx),
        }
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
    /// What it gives back.
    pub(crate) ticket: Ticket,
    /// The store took its permits (not `on_error`, nor a dry run letting a
    /// denial through): its decision says something true of the store.
    pub(crate) taken: bool,
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
        self.ticket.lease().is_some_and(|lease| !lease.lost.load(Ordering::Relaxed) && !lease.is_lost())
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
        self.ticket.lease().is_some_and(|lease| lease.is_lost())
    }

    /// Waits until the lease is lost ([`is_lost`](Self::is_lost)); for a
    /// permit that holds nothing, forever. For a body that must stop when
    /// it no longer holds its permit:
    /// `tokio::select! { done = work() => done, () = permit.lost() => give_up() }`.
    pub async fn lost(&self) {
        match self.ticket.lease() {
            Some(lease) => lease.lost().await,
            None => std::future::pending().await,
        }
    }

    /// Gives the permit back now and waits for the store to take it:
    /// `Err` when it could not (then its lease runs out instead).
    pub async fn release(mut self) -> Result<(), Error> {
        match self.ticket.lease.take() {
            Some((lease, renewal)) => {
                if let Some(renewal) = renewal {
                    renewal.abort();
                }
                lease.release().await
            }
            None => Ok(()),
        }
    }

    /// Settles a reservation ([`Limiter::reserve`]) at the `actual` cost and
    /// returns the key's state after it, as [`peek`](Limiter::peek) of cost
    /// 0 would report it: what the estimate took above `actual` comes back
    /// (as [`Limiter::refund`] gives back: a late settlement only what the
    /// reservation still holds), what `actual` is above the estimate is
    /// charged whatever the room, owed past the limit if need be. One store
    /// call, under the policy and dry run of the limiter that reserved.
    ///
    /// A reservation the store took nothing for (a call `on_error` or a dry
    /// run let through) has nothing to settle: its decision comes back
    /// as it was. Any other permit is not a reservation: `Err(Error::Misuse)`.
    /// `Err` is also a settlement the store could not make (it may or may
    /// not have been made, after a timeout); it is never sent twice.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let bytes = Limiter::new("egress", Policy::fixed_window("100/1m")?, &store);
    /// let download = bytes.reserve("tenant-3", 40).await.unwrap();
    /// assert_eq!(download.settle(70).await?.remaining, 30, "40 taken, 30 charged");
    /// let other = bytes.acquire("tenant-3").await.unwrap();
    /// assert!(matches!(other.settle(5).await, Err(redlimit::Error::Misuse(_))));
    /// # Ok(()) }
    /// ```
    pub async fn settle(mut self, actual: u64) -> Result<Decision, Error> {
        match self.ticket.refund.take() {
            Some(reserved) => {
                let Refund { limiter, key, cost, of } = *reserved;
                limiter.settle_of(&key, cost, actual, of).await
            }
            None if !self.taken => Ok(self.decision.clone()),
            None => Err(Error::Misuse(
                "only a reservation is settled: take it with `Limiter::reserve`, which keeps what it took".into(),
            )),
        }
    }

    /// The decision and what the permit gives back, apart.
    pub(crate) fn into_parts(self) -> (Decision, Ticket) {
        (self.decision, self.ticket)
    }
}

/// What an admitted call gives back: its lease (a concurrency policy's),
/// when dropped, and what it took, when refunded. An annotated function's
/// body holds one, bound to a local that lives for the body, so a return,
/// a panic or a dropped future all give the lease back.
#[doc(hidden)]
#[derive(Default)]
pub struct Ticket {
    lease: Option<Renewed>,
    /// Boxed: most calls refund nothing, and every call moves its ticket.
    refund: Option<Box<Refund>>,
}

/// What a refund gives back: `cost` permits of `key`, of the call `of` describes.
struct Refund {
    limiter: Limiter,
    key: Box<[u8]>,
    cost: u64,
    of: Refunded,
}

impl Ticket {
    /// The lease it holds, if any (a concurrency policy's).
    pub(crate) fn lease(&self) -> Option<&Arc<Lease>> {
        self.lease.as_ref().map(|(lease, _)| lease)
    }

    /// The limiter a refund would give back through, when the ticket keeps one.
    pub(crate) fn refunding(&self) -> Option<&Limiter> {
        self.refund.as_ref().map(|refund| &refund.limiter)
    }

    /// Gives back what the call took (its body did not run, or failed), and
    /// returns the key's state after it: `None` when there was nothing to
    /// give back or the refund failed (logged by the limiter).
    pub(crate) async fn refunded(&mut self) -> Option<Decision> {
        self.settled(0).await
    }

    /// Settles what the call took, a reservation of its cost, at `actual`,
    /// and returns the key's state after it: `None` when there was nothing
    /// to settle or the settlement failed (logged by the limiter).
    pub(crate) async fn settled(&mut self, actual: u64) -> Option<Decision> {
        let Refund { limiter, key, cost, of } = *self.refund.take()?;
        limiter.inner.refunds.settle(&limiter, &key, (cost, actual), of).await
    }
}

impl Drop for Ticket {
    #[inline]
    fn drop(&mut self) {
        if let Some(held) = self.lease.take() {
            give_back(held);
        }
    }
}

/// Stops a lease's renewals and gives its permit back.
#[cold]
fn give_back((lease, renewal): Renewed) {
    if let Some(renewal) = renewal {
        renewal.abort();
    }
    lease.give_back();
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket").field("lease", &self.lease.is_some()).field("refund", &self.refund.is_some()).finish()
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("decision", &self.decision)
            .field("taken", &self.taken)
            .field("held", &self.is_held())
            .finish()
    }
}
