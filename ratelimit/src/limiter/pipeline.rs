//! The decision pipeline: every call of a [`Limiter`] (`check`, `peek`,
//! `limit`, `wait`, a permit's acquisition, annotated functions, the HTTP
//! layer) is decided by one future, [`Deciding`]:
//!
//! ```text
//! first poll ─ budget ─┬─ prefetch? the key's local quota (prefetch/) ───────────────┐
//!                      └─ ask: deny cache (a remote store) → Bound::decide ─┬─ Now ──┤
//!                                            round trip, then remember ◄─ Later      │
//!                                   count (metrics) and record (span) ◄──────────────┘
//! ```
//!
//! A store in this process answers in the first poll, so its call never
//! waits; the budget is spent before the store is asked, so a task looping
//! on a denied key (answered here as fast as I/O would not be) yields to the
//! others as I/O would make it.

use crate::backend::{Answer, BoxFuture};
use crate::call::{Call, CallKind};
use crate::clock::{process_now_us, process_ns};
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::deny_cache::DenyCache;
use crate::observe::{self, LimiterMetrics};
use crate::Limiter;
use once_cell::sync::OnceCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tracing::Span;

/// One call of `limiter`, decided: the future every entry point awaits.
/// `K` is the key as the caller gave it (`check` owns it).
pub(crate) struct Deciding<'a, K> {
    limiter: &'a Limiter,
    key: K,
    cost: u64,
    kind: CallKind,
    progress: Progress<'a>,
}

/// How far one call is through the pipeline: what [`Limiter::poll_decide`]
/// keeps between polls, for whichever future drives the call.
#[derive(Default)]
pub(crate) struct Progress<'a> {
    /// Polled once: its budget is spent and the store asked.
    asked: bool,
    /// What it waits for after its first poll; `None` for an answer made at once.
    waiting: Option<Waiting<'a>>,
}

enum Waiting<'a> {
    /// The store's round trip, and what its answer teaches the deny cache.
    Store {
        answer: BoxFuture<'a, Result<Decision, Error>>,
        remember: Option<Remembering<'a>>,
        sent_ns: u64,
        /// Boxed: only a program that takes DEBUG events pays for the span.
        span: Option<Box<Span>>,
    },
    /// An answer a remote store made without I/O, kept while the task
    /// yields: its budget was spent. Boxed: it is rare, and every call's
    /// future would otherwise hold room for a whole decision.
    Answered(Box<Result<Decision, Error>>),
    /// A check through the key's local quota (`Limiter::with_prefetch`),
    /// and its span, boxed.
    Prefetch(BoxFuture<'a, Result<Decision, Error>>, Option<Box<Span>>),
}

/// The deny cache taking part in a call, and the call's time in this
/// process, which dates what it remembers.
#[derive(Clone, Copy)]
pub(crate) struct Remembering<'a> {
    cache: &'a DenyCache,
    at_us: u64,
    /// The store's data epoch when the call began ([`Bound::data_epoch`](crate::backend::Bound::data_epoch)).
    epoch: u64,
}

// The key is only ever read through a shared reference, never pinned, so
// the call may move whatever the key's type.
impl<K> Unpin for Deciding<'_, K> {}

impl Limiter {
    /// Decides `key`'s call of `cost` and `kind` (see [`Deciding`]).
    pub(crate) fn decide<K: AsRef<[u8]>>(&self, key: K, cost: u64, kind: CallKind) -> Deciding<'_, K> {
        Deciding { limiter: self, key, cost, kind, progress: Progress::default() }
    }

    /// Asks the store, or the deny cache in front of a remote one: the
    /// pipeline's one question, which prefetch's refills ask too. A denial
    /// the cache answers teaches it nothing, so `remember` is then emptied:
    /// written again, it would date the denial by this call, and a call on
    /// another thread that read its time a moment earlier would miss it.
    #[inline]
    pub(crate) fn ask(&self, call: Call<'_>, remember: &mut Option<Remembering<'_>>) -> Answer<'_> {
        if let Some(Remembering { cache, at_us, epoch }) = *remember {
            if let Some(remembered) = cache.get(call.key, call.cost, || self.rule.fingerprint(), epoch, at_us) {
                *remember = None;
                return Answer::Now(Ok(remembered));
            }
        }
        self.rule.bound.decide(call, &*self.inner.store.clock)
    }

    /// The deny cache taking part in this call, if any, and the call's time
    /// in this process: a check (not a peek, nor a permit's acquisition: a
    /// permit can be given back at any moment) of some cost, on a store in
    /// another process (one in this process decides as fast as the cache
    /// would answer, and the same).
    #[inline]
    fn remembering(&self, call: Call<'_>) -> Option<Remembering<'_>> {
        if !self.rule.remote {
            return None;
        }
        let cache = self.deny_cache.as_deref().filter(|_| call.kind == CallKind::Check && call.cost > 0)?;
        // The store's own clock is not this process's: date by ours.
        let at_us = self.inner.store.clock.now_us().map_or_else(process_now_us, crate::clock::bounded);
        Some(Remembering { cache, at_us, epoch: self.rule.bound.data_epoch() })
    }

    /// [`ask`](Self::ask), its round trip awaited and timed, and its answer
    /// remembered: a prefetch refill's store call, counted by the call it serves.
    pub(crate) async fn asked(&self, call: Call<'_>) -> Result<Decision, Error> {
        let mut remember = self.remembering(call);
        let result = match self.ask(call, &mut remember) {
            Answer::Now(result) => result,
            Answer::Later(answer) => {
                let sent_ns = process_ns();
                let result = answer.await;
                self.store_took(sent_ns);
                result
            }
        };
        self.remember(call, remember, &result);
        result
    }

    /// What a store's answer teaches the deny cache: a denial is
    /// remembered, an admission forgets the key's denials (a smaller cost
    /// got through and changed the state: a remembered denial of a larger
    /// one may now name too early a time).
    #[inline]
    fn remember(&self, call: Call<'_>, remember: Option<Remembering<'_>>, result: &Result<Decision, Error>) {
        if let (Some(Remembering { cache, at_us, epoch }), Ok(decision)) = (remember, result) {
            match decision.allowed {
                true => cache.forget(call.key),
                false => cache.remember(call.key, call.cost, (self.rule.fingerprint(), epoch), at_us, decision),
            }
        }
    }

    fn store_took(&self, sent_ns: u64) {
        self.metrics().store_took(Duration::from_nanos(process_ns().saturating_sub(sent_ns)));
    }

    /// The pipeline's ending: the decision (a check's or an acquisition's:
    /// not a peek's, nor a refund's) or the store's failure counted in the
    /// metrics, and recorded in its span; an answer also ends the limiter's
    /// outage, if one was logged.
    #[inline]
    fn count(&self, result: &Result<Decision, Error>, kind: CallKind, span: Option<Span>) {
        match result {
            Ok(decision) => {
                if matches!(kind, CallKind::Check | CallKind::Acquire(_)) {
                    self.metrics().decided(decision.allowed, !decision.allowed && self.is_dry_run());
                }
                self.enforcement.on_error.answered(self);
            }
            Err(error) => observe::store_error(error),
        }
        if let Some(span) = span {
            observe::record(&span, result, self.is_dry_run());
        }
    }

    /// The decision span of a call that decides (a refund does not), while
    /// some subscriber takes DEBUG events.
    #[inline]
    fn span(&self, cost: u64, kind: CallKind) -> Option<Span> {
        let wanted = !matches!(kind, CallKind::Refund(_) | CallKind::Charge) && observe::decision_span_wanted();
        wanted.then(|| observe::decision_span(&self.inner.name, self.rule.policy.algorithm().name(), cost))
    }

    #[inline]
    pub(crate) fn metrics(&self) -> &LimiterMetrics {
        let algorithm = self.rule.policy.algorithm();
        let cell = &self.inner.metrics[algorithm as usize];
        cell.get().unwrap_or_else(|| self.register_metrics(cell))
    }

    /// Registers the handles at the first decision: out of line, so a call
    /// after it reads them with no set-up of its own.
    #[cold]
    #[inline(never)]
    fn register_metrics<'a>(&'a self, cell: &'a OnceCell<LimiterMetrics>) -> &'a LimiterMetrics {
        let algorithm = self.rule.policy.algorithm();
        cell.get_or_init(|| LimiterMetrics::register(&self.inner.name, algorithm.name()))
    }
}

impl Limiter {
    /// The first poll's question, while a subscriber takes DEBUG events: in
    /// the decision's span, which records the answer. Out of line, so the
    /// common call carries nothing of it.
    #[cold]
    #[inline(never)]
    fn ask_in_span<'a>(
        &'a self,
        waiting: &mut Option<Waiting<'a>>,
        call: Call<'_>,
        span: Span,
    ) -> Option<Result<Decision, Error>> {
        let limiter = self;
        let entered = span.enter();
        let mut remember = limiter.remembering(call);
        match limiter.ask(call, &mut remember) {
            Answer::Now(result) => {
                limiter.remember(call, remember, &result);
                drop(entered);
                limiter.count(&result, call.kind, Some(span));
                Some(result)
            }
            Answer::Later(answer) => {
                drop(entered);
                let span = Some(Box::new(span));
                *waiting = Some(Waiting::Store { answer, remember, sent_ns: process_ns(), span });
                None
            }
        }
    }
}

impl Limiter {
    /// A check through the key's local quota, started: boxed, with its own
    /// copy of the key, so only a limiter with prefetch pays for its local
    /// quota's state; out of line, so the pipeline's frame holds none of it.
    #[inline(never)]
    fn prefetching<'a>(&'a self, prefetch: &'a crate::prefetch::Prefetch, call: Call<'_>) -> Waiting<'a> {
        let limiter = self;
        let (key, cost): (Box<[u8]>, u64) = (call.key.into(), call.cost);
        let spend = Box::pin(async move { limiter.prefetched(prefetch, &key, cost).await });
        let span = limiter.span(cost, call.kind).map(Box::new);
        Waiting::Prefetch(spend, span)
    }
}

impl<'a, K> Deciding<'a, K> {
    /// The limiter it decides for.
    pub(crate) fn limiter(&self) -> &'a Limiter {
        self.limiter
    }
}

impl<K: AsRef<[u8]>> Future for Deciding<'_, K> {
    type Output = Result<Decision, Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let call = Call { key: this.key.as_ref(), cost: this.cost, kind: this.kind };
        this.limiter.poll_decide(call, &mut this.progress, cx)
    }
}

impl Limiter {
    /// The pipeline, one poll at a time: `call` at `progress`. Its first
    /// poll spends the budget and answers at once when it can (a store in
    /// this process, a remembered denial, a prefetched permit); else it
    /// keeps the round trip (or the prefetch) in `progress` and answers
    /// when that does.
    #[inline]
    pub(crate) fn poll_decide<'a>(
        &'a self,
        call: Call<'_>,
        progress: &mut Progress<'a>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Decision, Error>> {
        let limiter = self;
        if !progress.asked {
            // A store in this process (or a local quota) answers here: the
            // budget is spent before it is asked, so no answer waits across a
            // yield. A remote store's round trip spends it as I/O does.
            let here = !limiter.rule.remote || limiter.prefetch.is_some();
            if here {
                ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
            }
            progress.asked = true;
            let answered = if let Some(prefetch) = limiter.prefetch_for(call.kind, call.cost) {
                progress.waiting = Some(limiter.prefetching(prefetch, call));
                None
            } else if let Some(span) = limiter.span(call.cost, call.kind) {
                limiter.ask_in_span(&mut progress.waiting, call, span)
            } else {
                let mut remember = limiter.remembering(call);
                match limiter.ask(call, &mut remember) {
                    Answer::Now(result) => {
                        limiter.remember(call, remember, &result);
                        limiter.count(&result, call.kind, None);
                        Some(result)
                    }
                    Answer::Later(answer) => {
                        let waiting = Waiting::Store { answer, remember, sent_ns: process_ns(), span: None };
                        progress.waiting = Some(waiting);
                        None
                    }
                }
            };
            if let Some(result) = answered {
                if here {
                    return Poll::Ready(result);
                }
                // A remote store answered without I/O (a remembered denial,
                // the breaker failing fast): spend the budget as I/O would,
                // so a task looping on such answers yields to the others.
                return match tokio::task::coop::poll_proceed(cx) {
                    Poll::Ready(spent) => {
                        spent.made_progress();
                        Poll::Ready(result)
                    }
                    Poll::Pending => {
                        progress.waiting = Some(Waiting::Answered(Box::new(result)));
                        Poll::Pending
                    }
                };
            }
        }
        let result = match &mut progress.waiting {
            Some(Waiting::Store { answer, remember, sent_ns, span }) => {
                let entered = span.as_deref().map(Span::enter);
                let result = ready!(answer.as_mut().poll(cx));
                drop(entered);
                // A refund or a charge is not a decision: the metric times the store's decisions.
                if !matches!(call.kind, CallKind::Refund(_) | CallKind::Charge) {
                    limiter.store_took(*sent_ns);
                }
                limiter.remember(call, *remember, &result);
                limiter.count(&result, call.kind, span.take().map(|span| *span));
                result
            }
            Some(Waiting::Prefetch(spending, span)) => {
                let entered = span.as_deref().map(Span::enter);
                let result = ready!(spending.as_mut().poll(cx));
                drop(entered);
                limiter.count(&result, call.kind, span.take().map(|span| *span));
                result
            }
            Some(Waiting::Answered(_)) => match progress.waiting.take() {
                Some(Waiting::Answered(result)) => return Poll::Ready(*result),
                _ => unreachable!("matched just above"),
            },
            None => panic!("a decision polled after it was answered"),
        };
        progress.waiting = None;
        Poll::Ready(result)
    }
}
