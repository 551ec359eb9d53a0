//! [`Breaker`]: after a failure to reach the store, fail fast for a while.

use crate::error::{Error, Failure};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Remembers a failure to reach Redis for a short interval, shared by every
/// clone of a backend, so callers fail at once instead of each waiting out a
/// timeout; after the interval the next call tries Redis again.
#[derive(Debug)]
pub(crate) struct Breaker {
    origin: Instant,
    /// Microseconds since `origin` until which calls fail fast; 0 when closed.
    open_until_us: AtomicU64,
    /// What calls fail with while it is open.
    failure: Mutex<Option<Error>>,
}

impl Breaker {
    pub(crate) fn new() -> Self {
        Breaker { origin: Instant::now(), open_until_us: AtomicU64::new(0), failure: Mutex::new(None) }
    }

    fn elapsed_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The error calls fail with while the breaker is open: an
    /// [`Error::Unavailable`] naming the failure that opened it.
    pub(crate) fn open(&self) -> Option<Error> {
        let until = self.open_until_us.load(Ordering::Acquire);
        // Closed since it last expired: no clock to read (most calls).
        if until == 0 {
            return None;
        }
        if self.elapsed_us() < until {
            self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
        } else {
            // Expired: closed again, unless another failure has just reopened it.
            let _ = self.open_until_us.compare_exchange(until, 0, Ordering::AcqRel, Ordering::Relaxed);
            None
        }
    }

    /// Opens the breaker for `interval` because of `error`.
    pub(crate) fn trip(&self, error: &Error, interval: Duration) {
        // Made once here, so each fast failure is a clone, not a new message.
        let message = format!("{error} (Redis is not asked again for {interval:?})");
        let failing_fast = Error::Unavailable(Failure::caused_by(message, error.clone()));
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(failing_fast);
        // At least 1: 0 means closed. Saturating, so no interval wraps round
        // to one already past (`RedisOptions` bounds it to an hour anyway).
        let interval_us = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        self.open_until_us.store(self.elapsed_us().saturating_add(interval_us).max(1), Ordering::Release);
    }
}
