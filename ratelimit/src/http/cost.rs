//! [`RequestCost`]: the permits a [`RateLimitLayer`](super::RateLimitLayer)
//! request takes, fixed for the layer or computed from each request.

use axum::extract::Request;
use axum::http::StatusCode;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A user's cost function: `None` when the request does not say what it costs.
type CostFn = Arc<dyn Fn(&Request) -> Option<u64> + Send + Sync>;

/// What a request costs: the same for every request, or computed from it.
#[derive(Clone)]
pub(super) enum RequestCost {
    Fixed(u64),
    By {
        cost_of: CostFn,
        /// Whether a panicking cost function was already logged.
        told_panic: Arc<AtomicBool>,
    },
}

impl RequestCost {
    pub(super) fn by(cost_of: impl Fn(&Request) -> Option<u64> + Send + Sync + 'static) -> RequestCost {
        RequestCost::By { cost_of: Arc::new(cost_of), told_panic: Arc::default() }
    }

    /// The permits `request` takes; `Err` carries the status and detail to
    /// answer instead, the request charged nothing: a `400` when the
    /// function finds no cost in it (a malformed header, say), a plain
    /// `500` when the function panics (a bug of the server's, logged once).
    pub(super) fn of(&self, request: &Request, limiter: &str) -> Result<u64, (StatusCode, String)> {
        let (cost_of, told_panic) = match self {
            RequestCost::Fixed(cost) => return Ok(*cost),
            RequestCost::By { cost_of, told_panic } => (cost_of, told_panic),
        };
        // A panic would otherwise take the connection down with it; the
        // function only reads the request, so nothing is left half done.
        match catch_unwind(AssertUnwindSafe(|| cost_of(request))) {
            Ok(Some(cost)) => Ok(cost),
            Ok(None) => {
                let detail = format!(
                    "this route is rate limited by `{limiter}` at a cost computed from each request, and this request's cost could not be read from it"
                );
                Err((StatusCode::BAD_REQUEST, detail))
            }
            Err(_) => {
                if !told_panic.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        target: "redlimit",
                        limiter,
                        "the cost function of rate limiter `{limiter}` panicked, and the request was answered 500 without being charged (said once): return None for a request whose cost cannot be read",
                    );
                }
                Err((StatusCode::INTERNAL_SERVER_ERROR, String::new()))
            }
        }
    }
}
