//! [`Here`]: a call to a store in this process, decided in one poll.
//!
//! The store answers at once, so the call needs no state between polls:
//! the poll spends one unit of tokio's cooperative budget (yielding, as I/O
//! would, when the task has none left), asks the store, which writes the
//! caller's [`Decision`] itself, and counts it. No deny cache takes part
//! (the store answers as fast, and the same), and no future or `Outcome`
//! stands between the store and the caller.

use crate::backend::CallKind;
use crate::{Decision, Error, Limiter};
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// One call of `limiter` to its store in this process (`Bound::remote` false),
/// with no local quota and no span to keep.
pub(crate) struct Here<'a> {
    pub(crate) limiter: &'a Limiter,
    pub(crate) key: &'a [u8],
    pub(crate) cost: u64,
    pub(crate) kind: CallKind,
}

impl Future for Here<'_> {
    type Output = Result<Decision, Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Spent before the store is asked, so no answer waits across a yield.
        ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        let Here { limiter, key, cost, kind } = *self;
        let rule = &limiter.rule;
        let result = rule.bound.decide_here(key, cost, kind, &*limiter.inner.store.clock, &rule.policy);
        limiter.count(&result, kind);
        Poll::Ready(result)
    }
}
