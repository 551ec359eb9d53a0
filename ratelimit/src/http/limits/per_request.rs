//! [`PerRequest`]: the limits of a [`RateLimitLayer::per_request`](crate::http::RateLimitLayer::per_request)
//! layer, one limiter deciding each request by the policy computed from it.

use super::source::{Chosen, LimiterSource};
use crate::policy::Policy;
use axum::extract::Request;
use axum::http::StatusCode;
use std::borrow::Borrow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The user's function, its answer made owned: the policy crosses the
/// await that builds the limiter, which a borrow of the request cannot.
type PolicyFn = Arc<dyn Fn(&Request) -> Option<Policy> + Send + Sync>;

/// One limiter (its name, store and keys) and the function that gives each request's policy.
pub(crate) struct PerRequest {
    source: LimiterSource,
    policy_of: PolicyFn,
    /// Whether a request given no policy was already logged.
    told_none: Arc<AtomicBool>,
}

impl PerRequest {
    pub(crate) fn new<P: Borrow<Policy>>(
        source: LimiterSource,
        policy_of: impl Fn(&Request) -> Option<P> + Send + Sync + 'static,
    ) -> PerRequest {
        let policy_of: PolicyFn = Arc::new(move |request| policy_of(request).map(|p| p.borrow().clone()));
        PerRequest { source, policy_of, told_none: Arc::default() }
    }

    pub(super) fn name(&self) -> &str {
        self.source.name()
    }

    /// The limiter and the policy deciding `request`. A request given no
    /// policy is a server set up wrong (the layer that sets what the
    /// function reads is missing or runs after this one), not a client's
    /// mistake: a plain 500, and the operator is told once at ERROR.
    pub(super) fn choose(&self, request: &Request) -> Result<Chosen, (StatusCode, String)> {
        match (self.policy_of)(request) {
            Some(policy) => Ok(Chosen::by(self.source.clone(), Some(policy))),
            None => {
                if !self.told_none.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        target: "redlimit",
                        limiter = %self.name(),
                        "the policy function of rate limiter `{}` gave no policy for a request, which was answered 500 (said once): return a policy for every request (a default one for requests without a plan), and run the layer that sets what it reads (authentication, say) before this one",
                        self.name(),
                    );
                }
                Err((StatusCode::INTERNAL_SERVER_ERROR, String::new()))
            }
        }
    }
}
