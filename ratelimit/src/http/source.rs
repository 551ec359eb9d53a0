//! [`Source`]: where one limiter of a [`RateLimitLayer`](super::RateLimitLayer)
//! comes from (given, or built on the global store at the first request).

use crate::lazy::LazyLimiter;
use crate::{Limiter, OnError, Policy};
use std::sync::Arc;

/// Where a layer's (or a tier's) limiter comes from.
#[derive(Clone)]
pub(super) enum Source {
    /// Given, with its own store and `OnError`.
    Limiter(Limiter),
    /// Built on the global store at the first request.
    Lazy(Arc<LazyLimiter>),
}

impl Source {
    pub(super) fn name(&self) -> &str {
        match self {
            Source::Limiter(limiter) => limiter.name(),
            Source::Lazy(lazy) => lazy.name(),
        }
    }

    /// The limiter deciding now, by `per_request` when the request gave a
    /// policy; `Err` when a named policy is not configured.
    pub(super) async fn limiter(&self, per_request: Option<&Policy>) -> Result<Limiter, Arc<str>> {
        match (self, per_request) {
            (Source::Limiter(limiter), None) => Ok(limiter.clone()),
            (Source::Limiter(limiter), Some(policy)) => Ok(limiter.with_policy(policy)),
            (Source::Lazy(lazy), _) => lazy.current(per_request).await.map(|(limiter, _)| limiter),
        }
    }

    /// The same source with another `on_error`; a given limiter keeps its own.
    pub(super) fn with_on_error(&self, on_error: OnError) -> Source {
        match self {
            Source::Limiter(limiter) => Source::Limiter(limiter.clone()),
            Source::Lazy(lazy) => Source::Lazy(Arc::new(lazy.with_on_error(on_error))),
        }
    }
}
