//! [`Here`]: a call to a store in this process, decided in one poll, and
//! the future `Limiter::check` and `peek` return.
//!
//! The store answers at once, so the call needs no state between polls:
//! the poll spends one unit of tokio's cooperative budget (yielding, as I/O
//! would, when the task has none left), asks the store, which writes the
//! caller's [`Decision`] itself, and counts it. No deny cache takes part
//! (the store answers as fast, and the same), and no future or `Outcome`
//! stands between the store and the caller.

use crate::backend::CallKind;
use crate::observe;
use crate::permit::Holding;
use crate::site::Site;
use crate::{AlgorithmKind, Decision, Error, Limiter, RateLimited};
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// One call of `limiter` to its store in this process (`Bound::remote` false),
/// with no local quota to spend. `K` is the key as the caller gave it: a
/// `Limiter::check` future owns it.
pub(crate) struct Here<'a, K> {
    pub(crate) limiter: &'a Limiter,
    pub(crate) key: K,
    pub(crate) cost: u64,
    pub(crate) kind: CallKind,
}

// The key is only ever read through a shared reference, never pinned, so
// the call may move whatever the key's type.
impl<K> Unpin for Here<'_, K> {}

impl<K: AsRef<[u8]>> Future for Here<'_, K> {
    type Output = Result<Decision, Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Spent before the store is asked, so no answer waits across a yield.
        ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        Poll::Ready(self.limiter.decide_now(self.key.as_ref(), self.cost, self.kind))
    }
}

impl Limiter {
    /// `check`'s and `peek`'s future: [`Here`] itself when the limiter
    /// decides in this process (no `async fn` around it to move its answer
    /// through), else the pipeline, boxed, since that future owns the key.
    pub(crate) fn asking<'a, K: AsRef<[u8]> + 'a>(
        &'a self,
        key: K,
        cost: u64,
        kind: CallKind,
    ) -> Asking<'a, K, impl Future<Output = Result<Decision, Error>> + 'a> {
        match self.decides_here() {
            true => Asking::Here(Here { limiter: self, key, cost, kind }),
            false => Asking::Pipeline(Box::pin(async move { self.decide(key.as_ref(), cost, kind).await })),
        }
    }

    /// Whether this limiter's calls are [`Here`]'s: its store is in this
    /// process and it has no local quotas.
    #[inline]
    pub(crate) fn decides_here(&self) -> bool {
        self.prefetch.is_none() && !self.rule.remote
    }

    /// Whether a call of a rate policy ([`decides_here`](Self::decides_here)
    /// and no permit to hold) decides here.
    #[inline]
    pub(crate) fn spends_here(&self) -> bool {
        self.decides_here() && self.rule.policy.algorithm() != AlgorithmKind::Concurrency
    }

    /// [`Here`]'s call once its budget is spent: the store's answer, counted
    /// (and recorded in the decision span, when a subscriber takes DEBUG).
    #[inline]
    pub(crate) fn decide_now(&self, key: &[u8], cost: u64, kind: CallKind) -> Result<Decision, Error> {
        if observe::decision_span_wanted() {
            return self.decide_now_in_span(key, cost, kind);
        }
        let rule = &self.rule;
        let result = rule.bound.decide_here(key, cost, kind, &*self.inner.store.clock, &rule.policy);
        self.count(&result, kind);
        result
    }

    #[cold]
    #[inline(never)]
    fn decide_now_in_span(&self, key: &[u8], cost: u64, kind: CallKind) -> Result<Decision, Error> {
        let span = observe::decision_span(&self.inner.name, self.rule.policy.algorithm().name(), cost);
        let rule = &self.rule;
        let result = span.in_scope(|| rule.bound.decide_here(key, cost, kind, &*self.inner.store.clock, &rule.policy));
        observe::record(&span, &result);
        self.count(&result, kind);
        result
    }
}

/// [`Limiter::asking`]'s future.
pub(crate) enum Asking<'a, K, F> {
    Here(Here<'a, K>),
    Pipeline(Pin<Box<F>>),
}

impl<K: AsRef<[u8]>, F: Future<Output = Result<Decision, Error>>> Future for Asking<'_, K, F> {
    type Output = Result<Decision, Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Asking::Here(here) => Pin::new(here).poll(cx),
            Asking::Pipeline(pipeline) => pipeline.as_mut().poll(cx),
        }
    }
}

impl Site {
    /// [`Site::check`]'s call when [`Site::limiter_here`] gives its limiter.
    pub(crate) fn call<'a>(&'static self, limiter: &'static Limiter, key: &'a [u8], cost: u64) -> SiteCall<'a> {
        SiteCall { site: self, limiter, key, cost }
    }

    /// What a call decided in one poll gives the body: `acquire_holding`'s
    /// answer, with no future around it.
    pub(crate) fn spent_here(
        &'static self,
        limiter: &Limiter,
        key: &[u8],
        cost: u64,
        decided: Result<Decision, Error>,
    ) -> Result<Holding, Box<RateLimited>> {
        // An admission is the common answer: no `enforce` to move it through.
        let _decision = match decided {
            Ok(decision) if decision.allowed => decision,
            decided => self.enforced_here(limiter, key, cost, decided)?,
        };
        #[cfg(feature = "axum")]
        crate::http::record_decision(limiter, &_decision);
        Ok(Holding::default())
    }

    #[cold]
    #[inline(never)]
    fn enforced_here(
        &'static self,
        limiter: &Limiter,
        key: &[u8],
        cost: u64,
        decided: Result<Decision, Error>,
    ) -> Result<Decision, Box<RateLimited>> {
        limiter.enforce(key, cost, decided).map(|(decision, _)| decision).map_err(|denied| self.denial(denied))
    }
}

/// An annotated function's call decided in its first poll, as [`Here`]:
/// the site's limiter is built, no scope is live, and the site adds
/// nothing to a rate policy's call on a store in this process.
pub(crate) struct SiteCall<'a> {
    site: &'static Site,
    limiter: &'static Limiter,
    key: &'a [u8],
    cost: u64,
}

impl Future for SiteCall<'_> {
    type Output = Result<Holding, Box<RateLimited>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        let SiteCall { site, limiter, key, cost } = *self;
        let decided = limiter.decide_now(key, cost, CallKind::Check);
        Poll::Ready(site.spent_here(limiter, key, cost, decided))
    }
}
