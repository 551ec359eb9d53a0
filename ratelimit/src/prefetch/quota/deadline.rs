//! [`Deadline`]: when a prefetching call's whole wait ends, a refill in
//! flight it waits for and its own store calls together: its arrival plus
//! how long one store call may take. Past it the call fails as a store
//! call that timed out does, so prefetch never makes a call wait longer
//! than the store's own bound.

use crate::error::Error;
use crate::Limiter;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// A call's deadline and the timeout it is reported as; none for a store
/// that answers at once, which needs no timer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Option<(Instant, Duration)>);

impl Deadline {
    /// The deadline of `limiter`'s call arriving now.
    pub(crate) fn from_now(limiter: &Limiter) -> Deadline {
        let bound = limiter.rule.bound.response_timeout();
        Deadline(bound.and_then(|timeout| Some((Instant::now().checked_add(timeout)?, timeout))))
    }

    /// The failure of a call past its deadline: the store's own timeout.
    fn timed_out(timeout: Duration) -> Error {
        Error::Timeout(timeout)
    }

    /// `future`'s output, or [`Error::Timeout`] at the deadline. A deadline
    /// already passed starts nothing (as a store call sends nothing then).
    pub(crate) async fn within<T>(self, future: impl Future<Output = T>) -> Result<T, Error> {
        let Some((at, timeout)) = self.0 else { return Ok(future.await) };
        if Instant::now() >= at {
            return Err(Self::timed_out(timeout));
        }
        tokio::time::timeout_at(at, future).await.map_err(|_| Self::timed_out(timeout))
    }

    /// [`within`](Self::within) for a call that may fail itself.
    pub(crate) async fn by<T>(self, future: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        self.within(future).await?
    }

    /// Whether the deadline has passed: the call has no time left for a store call.
    pub(crate) fn passed(self) -> Option<Error> {
        let (at, timeout) = self.0?;
        (Instant::now() >= at).then(|| Self::timed_out(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::store::Store;

    #[tokio::test]
    async fn a_call_never_answered_fails_at_its_deadline_as_a_store_timeout() {
        let timeout = Duration::from_millis(20);
        let deadline = Deadline(Some((Instant::now() + timeout, timeout)));
        let never = std::future::pending::<Result<(), Error>>();
        assert!(matches!(deadline.by(never).await, Err(Error::Timeout(after)) if after == timeout));
    }

    #[tokio::test]
    async fn past_its_deadline_a_call_starts_nothing() {
        let timeout = Duration::from_millis(1);
        let deadline = Deadline(Some((Instant::now(), timeout)));
        let started = std::cell::Cell::new(false);
        let result = deadline.within(async { started.set(true) }).await;
        assert!(matches!(result, Err(Error::Timeout(_))) && !started.get());
        assert!(deadline.passed().is_some());
    }

    #[tokio::test]
    async fn a_store_that_answers_at_once_sets_no_deadline() {
        let limiter = Limiter::new("memory", Policy::gcra("1/1s", 2).unwrap(), &Store::memory());
        let deadline = Deadline::from_now(&limiter);
        assert!(deadline.0.is_none() && deadline.passed().is_none());
        assert_eq!(deadline.within(async { 7 }).await.unwrap(), 7);
    }
}
