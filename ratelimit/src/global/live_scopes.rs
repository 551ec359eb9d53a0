//! [`LiveScopes`]: how many task-local scopes of one kind exist now, so a
//! call made outside all of them skips looking one up.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The count of one task-local's scopes ([`scope`](crate::global::scope)'s store,
/// the HTTP layer's record of decisions).
#[derive(Debug)]
pub(crate) struct LiveScopes(AtomicUsize);

impl LiveScopes {
    pub(crate) const fn new() -> LiveScopes {
        LiveScopes(AtomicUsize::new(0))
    }

    /// Counts one scope while the guard lives: made before the scope is
    /// first entered, dropped after it is left for good.
    pub(crate) fn enter(&'static self) -> LiveScope {
        self.0.fetch_add(1, Ordering::Relaxed);
        LiveScope(self)
    }

    /// Whether a scope may hold the calling task. A task is only ever in a
    /// scope while polling it, after its guard was made on this thread or
    /// handed here with the future, so a relaxed load sees that count.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }
}

/// One live scope, counted until dropped.
#[derive(Debug)]
pub(crate) struct LiveScope(&'static LiveScopes);

impl Drop for LiveScope {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Relaxed);
    }
}
