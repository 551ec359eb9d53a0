//! The global store `global` builds itself when none was set: it decides as
//! the store it wraps, and refuses every call while a [`Scope`](crate::Scope)
//! is live, since a process that made one meant its calls for that store.

use crate::backend::{Answer, Backend, Binding, Bound, BoxFuture, Call};
use crate::clock::Clock;
use crate::error::Error;
use crate::global::scope;
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;

/// `store`, refusing calls while a scope is live.
pub(crate) fn implicit(store: Store) -> Store {
    Store { backend: Arc::new(Implicit(store.backend)), ..store }
}

/// Why a call was refused: what it missed and how to reach its store.
fn refused() -> Error {
    Error::Misuse(
        "this call reached the global rate limit store, which was never set (redlimit::init), while a \
         redlimit::Scope is live: run it in the scope (redlimit::in_current_scope for a spawned task, \
         http::ScopeLayer for a server's requests, the scope's store for a Limiter) or set the global store"
            .into(),
    )
}

struct Implicit(Arc<dyn Backend>);

impl Backend for Implicit {
    fn bind(&self, limiter: Binding<'_>) -> Arc<dyn Bound> {
        Arc::new(ImplicitBound(self.0.bind(limiter)))
    }

    fn kind(&self) -> &'static str {
        self.0.kind()
    }
}

struct ImplicitBound(Arc<dyn Bound>);

impl Bound for ImplicitBound {
    fn decide<'a>(&'a self, call: Call<'_>, clock: &dyn Clock) -> Answer<'a> {
        match scope::may_be_inside() {
            true => Answer::Now(Err(refused())),
            false => self.0.decide(call, clock),
        }
    }

    fn reset<'a>(&'a self, key: &[u8]) -> BoxFuture<'a, Result<(), Error>> {
        match scope::may_be_inside() {
            true => Box::pin(std::future::ready(Err(refused()))),
            false => self.0.reset(key),
        }
    }

    fn remote(&self) -> bool {
        self.0.remote()
    }

    fn response_timeout(&self) -> Option<Duration> {
        self.0.response_timeout()
    }
}
