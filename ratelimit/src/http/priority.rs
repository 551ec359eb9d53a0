//! The class a [`RateLimitLayer`] decides each
//! request as, under a policy with headroom ([`Policy::with_headroom`](crate::Policy::with_headroom)).

use super::RateLimitLayer;
use crate::policy::Priority;
use axum::extract::Request;
use axum::http::StatusCode;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A user's class function, and whether its panic was already logged.
#[derive(Clone)]
pub(super) struct RequestPriority {
    priority_of: Arc<dyn Fn(&Request) -> Priority + Send + Sync>,
    told_panic: Arc<AtomicBool>,
}

impl RequestPriority {
    /// The class `request` is decided as; `Err` a plain `500` when the
    /// function panics (a bug of the server's, logged once), the request
    /// charged nothing.
    pub(super) fn of(&self, request: &Request, limiter: &str) -> Result<Priority, (StatusCode, String)> {
        // A panic would otherwise take the connection down with it.
        catch_unwind(AssertUnwindSafe(|| (self.priority_of)(request))).map_err(|_| {
            if !self.told_panic.swap(true, Ordering::Relaxed) {
                tracing::error!(
                    target: "redlimit",
                    limiter,
                    "the priority function of rate limiter `{limiter}` panicked, and the request was answered 500 without being charged (said once)",
                );
            }
            (StatusCode::INTERNAL_SERVER_ERROR, String::new())
        })
    }
}

impl RateLimitLayer {
    /// Decides each request as the class `priority_of` reads from it (a
    /// header, a route, an extension an authentication layer set), under a
    /// policy with headroom: a low request passes only while more than its
    /// class's headroom remains ([`Limiter::with_priority`](crate::Limiter::with_priority)).
    /// Its RateLimit header fields and its denial's describe what its own
    /// class may still use. Without this, every request is
    /// [`Priority::Normal`]; under a policy without headroom every class
    /// decides alike.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, ManualClock, Policy, Priority, Store};
    /// use tower_service::Service;
    ///
    /// let policy = Policy::fixed_window("10/1m")?.with_headroom(50, 20)?;
    /// let limiter = Limiter::new("api", policy, &Store::memory().with_clock(ManualClock::new()));
    /// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?).priority_by(|request: &Request| {
    ///     match request.headers().get("x-batch") {
    ///         Some(_) => Priority::Low,
    ///         None => Priority::Critical,
    ///     }
    /// });
    /// let mut app = Router::new().route("/", get(|| async { "hi" })).layer(layer);
    /// let batch = || Request::builder().uri("/").header("x-api-key", "k").header("x-batch", "1").body(Body::empty()).unwrap();
    /// let mut passed = 0;
    /// for _ in 0..10 {
    ///     passed += (app.call(batch()).await.unwrap().status() == 200) as u32;
    /// }
    /// assert_eq!(passed, 5, "batch requests keep half for the others");
    /// let denied = app.call(batch()).await.unwrap();
    /// assert_eq!(denied.headers()["ratelimit-policy"], "\"5/1m\";q=5;w=60", "what batch requests may use");
    /// let interactive = Request::builder().uri("/").header("x-api-key", "k").body(Body::empty()).unwrap();
    /// let response = app.call(interactive).await.unwrap();
    /// assert_eq!(response.headers()["ratelimit-policy"], "\"10/1m\";q=10;w=60");
    /// assert_eq!(response.headers()["ratelimit"], "\"10/1m\";r=4;t=60");
    /// # Ok(()) }
    /// ```
    pub fn priority_by(mut self, priority_of: impl Fn(&Request) -> Priority + Send + Sync + 'static) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).priority =
            Some(RequestPriority { priority_of: Arc::new(priority_of), told_panic: Arc::default() });
        self
    }
}
