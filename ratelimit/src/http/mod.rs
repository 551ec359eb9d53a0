//! HTTP (feature `axum`): a denial as a `429` response with the standard
//! header fields, and a tower layer that limits any route.
//!
//! - [`RateLimited`](crate::RateLimited) implements axum's `IntoResponse`:
//!   `429`, `Retry-After`, `RateLimit-Policy`, `RateLimit`
//!   (draft-ietf-httpapi-ratelimit-headers) and an `application/problem+json`
//!   body ([`denial_response`]).
//! - [`rate_limit_headers`] builds the same fields for any decision, allowed or not.
//! - [`DecisionHeadersLayer`] puts the fields of what `#[rate_limit]`
//!   functions decided on the response of the request that called them.
//! - [`RateLimitLayer`] limits the routes it wraps by client IP (behind
//!   [`TrustedProxies`]), a header, or a function of the request ([`KeyBy`]);
//!   it can exempt requests, shape its rejections, charge each request a
//!   cost computed from it ([`RateLimitLayer::cost_by`]) and settle it at what
//!   the handler says it cost ([`ActualCost`]), and choose a policy per
//!   request among [`Tiers`] or compute it from the request
//!   ([`RateLimitLayer::per_request`]), or give every route of a router its
//!   own limit ([`RateLimitLayer::per_route`], [`RouteLimits`]). Under a
//!   [`Policy::concurrency`](crate::Policy::concurrency) a request holds a
//!   permit while the route handles it and its body is sent, and the fields count requests in
//!   flight (`qu="concurrent-requests"`, no `w` or `t`).

mod actual_cost;
mod cost;
mod fields;
mod held_body;
mod key;
mod layer;
mod options;
mod priority;
mod response;
mod scope_layer;
mod service;

// Declared after `options`: rustdoc lists `RateLimitLayer`'s methods in the
// order of the modules that define them, and `limits/routes.rs` adds
// `per_route` and `per_route_on` after the options (`public-api.txt`).
mod limits;

pub use actual_cost::ActualCost;
pub use fields::decisions::{DecisionHeadersLayer, DecisionHeadersService};
pub use fields::headers::{
    insert_rate_limit_headers, insert_rate_limit_headers_in, rate_limit_headers, retry_after_secs, HeaderStyle,
    RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
};
pub use fields::quota::{PolicyItem, QuotaUnit};
pub use key::client_ip::{ProxyHeader, TrustedProxies};
pub use key::{KeyBy, MissingKey, MissingPeer};
pub use layer::RateLimitLayer;
pub use limits::routes::RouteLimits;
pub use limits::tiers::{TierBy, Tiers};
pub use response::{denial_response, PROBLEM_JSON, QUOTA_EXCEEDED};
pub use scope_layer::{ScopeLayer, ScopeService};
pub use service::RateLimitService;
