//! [`Limits`]: the limiters of a [`RateLimitLayer`](super::RateLimitLayer),
//! and which of them decides each request.
//!
//! The folder owns what chooses a request's limiter: where a limiter comes
//! from (`source.rs`), a policy chosen among tiers (`tiers.rs`) or computed
//! from the request (`per_request.rs`), and a limit for every route
//! (`routes.rs` builds it, `per_route.rs` decides).

pub(super) mod per_request;
pub(super) mod per_route;
pub(super) mod routes;
pub(super) mod source;
pub(super) mod tiers;

use self::per_request::PerRequest;
use self::per_route::PerRoute;
use self::source::{Chosen, LimiterSource};
use self::tiers::Tiered;
use axum::extract::Request;
use axum::http::StatusCode;
use std::sync::Arc;

/// A layer's limiters: one, one per tier, or one deciding by a policy per
/// request or per route.
#[derive(Clone)]
pub(super) enum Limits {
    One(LimiterSource),
    Tiered(Arc<Tiered>),
    PerRequest(Arc<PerRequest>),
    PerRoute(Arc<PerRoute>),
}

impl Limits {
    /// The layer's name: its limiter's, or the one a tiered layer was given.
    pub(super) fn name(&self) -> &str {
        match self {
            Limits::One(source) => source.name(),
            Limits::Tiered(tiered) => tiered.name(),
            Limits::PerRequest(per_request) => per_request.name(),
            Limits::PerRoute(per_route) => per_route.name(),
        }
    }

    /// What decides `request`: `Ok(None)` lets it through uncounted (an
    /// exempt route); `Err` carries the status and detail to answer instead
    /// (a `400` when it names no tier and there is no fallback).
    pub(super) fn choose(&self, request: &Request) -> Result<Option<Chosen>, (StatusCode, String)> {
        match self {
            Limits::One(source) => Ok(Some(Chosen::by(source.clone(), None))),
            Limits::Tiered(tiered) => tiered.choose(request).map(Some),
            Limits::PerRequest(per_request) => per_request.choose(request).map(Some),
            Limits::PerRoute(per_route) => Ok(per_route.choose(request)),
        }
    }
}
