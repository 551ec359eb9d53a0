//! The decision pipeline: every call of a [`Limiter`] (`check`, `peek`,
//! `limit`, `wait`, annotated functions, the HTTP layer) is decided here.
//!
//! ```text
//! decide ─ a store in this process, no prefetch: Here (here.rs) ──────────────────┐
//!        │   one poll: budget → the store writes the Decision → count (span?)     │
//!        └ prefetch? span? ─ run ─ a store in this process: budget → store ──┐    │
//!                               └ begin (sync): clock → deny cache → store   │    │
//!                                   ├─ answered in this process ──────┐      │    │
//!                                   └─ a round trip ─ finish (async) ─┤      │    │
//!                                      settle: Decision, deny cache ◄─┘      │    │
//!          ─ count (metrics), record (span) ◄────────────────────────────────┘    │
//!                                                                       Decision ◄┘
//! ```
//!
//! An answer made in this process still spends tokio's cooperative budget,
//! so a task looping on a denied key yields to the others as I/O would.

use crate::backend::{Answer, BoxFuture, CallKind, Outcome};
use crate::clock::{process_now_us, process_ns};
use crate::deny_cache::DenyCache;
use crate::here::Here;
use crate::observe::{self, LimiterMetrics};
use crate::{Decision, Error, Limiter};
use once_cell::sync::OnceCell;
use std::time::Duration;
use tracing::Instrument;

/// How far [`Limiter::begin`] got without waiting.
enum Step<'a> {
    Done(Result<Decision, Error>),
    /// The store answers through a round trip.
    Wait {
        answer: BoxFuture<'a, Result<Outcome, Error>>,
        cache: Option<Remembering<'a>>,
    },
}

/// The deny cache taking part in a call, and the call's time in this
/// process, which dates what it remembers.
#[derive(Clone, Copy)]
struct Remembering<'a> {
    cache: &'a DenyCache,
    at_us: u64,
}

impl Limiter {
    /// One decision, counted in the metrics and, when some subscriber takes
    /// DEBUG events, run in its tracing span. A call to a store in this
    /// process, with no prefetch, is decided in one poll ([`Here`]).
    pub(crate) async fn decide(&self, key: &[u8], cost: u64, kind: CallKind) -> Result<Decision, Error> {
        if self.decides_here() {
            return Here { limiter: self, key, cost, kind }.await;
        }
        if let Some(prefetch) = self.prefetch_for(kind, cost) {
            // Boxed: only a limiter with prefetch pays for its local quota's state.
            return Box::pin(self.decide_prefetched(prefetch, key, cost)).await;
        }
        if observe::decision_span_wanted() {
            // Boxed: only a program that takes DEBUG events pays for the span.
            return Box::pin(self.decide_in_span(key, cost, kind)).await;
        }
        let result = self.run(key, cost, kind).await;
        self.count(&result, kind);
        result
    }

    async fn decide_in_span(&self, key: &[u8], cost: u64, kind: CallKind) -> Result<Decision, Error> {
        let span = observe::decision_span(&self.inner.name, self.rule.policy.algorithm().name(), cost);
        let result = self.run(key, cost, kind).instrument(span.clone()).await;
        observe::record(&span, &result);
        self.count(&result, kind);
        result
    }

    pub(crate) async fn run(&self, key: &[u8], cost: u64, kind: CallKind) -> Result<Decision, Error> {
        if !self.rule.remote {
            return self.run_here(key, cost, kind).await;
        }
        match self.begin(key, cost, kind) {
            Step::Done(result) => {
                // Answered without I/O (deny cache, a store failing fast): spend
                // the task's budget as I/O would, so a loop of such calls yields.
                tokio::task::coop::consume_budget().await;
                result
            }
            Step::Wait { answer, cache } => self.finish(key, cost, answer, cache).await,
        }
    }

    /// A call to a store in this process: it answers at once, as fast as
    /// the deny cache would and with the same answer, so there is none. Its
    /// budget is spent first, as I/O would spend it, so a loop of such calls
    /// yields and no answer is kept across the wait.
    async fn run_here(&self, key: &[u8], cost: u64, kind: CallKind) -> Result<Decision, Error> {
        tokio::task::coop::consume_budget().await;
        self.rule.bound.decide_here(key, cost, kind, &*self.inner.store.clock, &self.rule.policy)
    }

    /// Everything a call does before it may have to wait: look in the deny
    /// cache, and ask the bound store, which reads the clock when it decides.
    fn begin(&self, key: &[u8], cost: u64, kind: CallKind) -> Step<'_> {
        let clock = &*self.inner.store.clock;
        let cache = self.deny_cache(cost, kind).map(|cache| Remembering {
            cache,
            // The store's own clock is not this process's: date by ours.
            at_us: clock.now_us().map_or_else(process_now_us, crate::clock::bounded),
        });
        if let Some(remembered) = cache.and_then(|c| c.cache.get(key, cost, || self.rule.fingerprint(), c.at_us)) {
            return Step::Done(Ok(remembered));
        }
        match self.rule.bound.decide_by(key, cost, kind, clock) {
            Answer::Now(outcome) => Step::Done(outcome.map(|outcome| self.settle(key, cost, cache, outcome))),
            Answer::Later(answer) => Step::Wait { answer, cache },
        }
    }

    /// The round trip, timed, and its outcome settled.
    async fn finish(
        &self,
        key: &[u8],
        cost: u64,
        answer: BoxFuture<'_, Result<Outcome, Error>>,
        cache: Option<Remembering<'_>>,
    ) -> Result<Decision, Error> {
        let started = process_ns();
        let outcome = answer.await;
        self.metrics().store_took(Duration::from_nanos(process_ns().saturating_sub(started)));
        outcome.map(|outcome| self.settle(key, cost, cache, outcome))
    }

    /// The store's outcome as a [`Decision`], kept in or cleared from the deny cache.
    fn settle(&self, key: &[u8], cost: u64, cache: Option<Remembering<'_>>, outcome: Outcome) -> Decision {
        let decision = Decision::from_outcome(outcome, &self.rule.policy);
        if let Some(Remembering { cache, at_us }) = cache {
            if decision.allowed {
                // A smaller cost got through and changed the state: a denial
                // remembered for a larger one may now name too early a time.
                cache.forget(key);
            } else {
                cache.remember(key, cost, self.rule.fingerprint(), at_us, &decision);
            }
        }
        decision
    }

    /// The deny cache, if it takes part in this call: a check (not a peek,
    /// nor a permit's acquisition: a permit can be given back at any
    /// moment), not cost 0, and a store in another process (one in this
    /// process decides as fast as the cache would answer, and with the
    /// same answer).
    fn deny_cache(&self, cost: u64, kind: CallKind) -> Option<&DenyCache> {
        self.deny_cache.as_deref().filter(|_| kind == CallKind::Check && cost > 0 && self.rule.remote)
    }

    /// Counts a decision (not a peek's) or a store failure in the metrics; an
    /// answer also ends the limiter's outage, if one was logged.
    pub(crate) fn count(&self, result: &Result<Decision, Error>, kind: CallKind) {
        match result {
            Ok(decision) => {
                if kind != CallKind::Peek {
                    self.metrics().decided(decision.allowed);
                }
                self.on_error.answered(self);
            }
            Err(error) => observe::store_error(error),
        }
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
