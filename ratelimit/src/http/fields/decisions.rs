//! [`DecisionHeadersLayer`]: the `RateLimit-Policy` and `RateLimit` fields
//! of what `#[rate_limit]` functions decided while a request was served.
//!
//! The layer runs the request inside a task-local scope; `Site::check`
//! records each allowed decision there ([`record`]), and the layer writes
//! them on the response. While the layer serves no request, recording is
//! one atomic load.

use super::headers::{merge_rate_limit_fields, rate_limit_headers, HeaderStyle, RATELIMIT};
use crate::decision::Decision;
use crate::global::live_scopes::LiveScopes;
use crate::limiter::Limiter;
use axum::http::header::RETRY_AFTER;
use axum::http::{Request, Response, StatusCode};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

/// The decisions of one request, in the order their limiters first decided.
type Recorded = Arc<Mutex<Vec<(Limiter, Decision)>>>;

tokio::task_local! {
    static DECISIONS: Recorded;
}

/// The layer's requests being served: while there are none, nothing is recorded.
static LIVE: LiveScopes = LiveScopes::new();

/// Records `decision` of `limiter` for the response of the request being
/// served, if a [`DecisionHeadersLayer`] serves it. A limiter deciding again
/// in the same request, or giving its call's permits back, replaces its
/// earlier decision (the newer state).
#[inline]
fn record(limiter: &Limiter, decision: &Decision) {
    if LIVE.any() {
        record_in_scope(limiter, decision);
    }
}

fn record_in_scope(limiter: &Limiter, decision: &Decision) {
    let _ = DECISIONS.try_with(|recorded| {
        let mut recorded = recorded.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = (limiter.clone(), decision.clone());
        match recorded.iter_mut().find(|(earlier, _)| earlier.name() == limiter.name()) {
            Some(slot) => *slot = entry,
            None => recorded.push(entry),
        }
    });
}

/// A tower [`Layer`](tower_layer::Layer) that puts on each response the
/// `RateLimit-Policy` and `RateLimit` fields of the `#[rate_limit]`
/// functions the request called and that allowed it, with no change in
/// their bodies.
///
/// - Each function is its own set of items, in the order the functions
///   first decided; stacked attributes are several sets. A function called
///   twice in one request reports its latest decision.
/// - A denial's `429` is left as it is: its fields describe the decision
///   that shaped it (an earlier allowed call of the same function would
///   contradict it). Fields already on any other response, such as a
///   [`RateLimitLayer`](crate::http::RateLimitLayer)'s inside this one, are kept
///   and these items added after them, so a client pacing by the fields
///   meets neither limit.
/// - Only calls made on the request's own task are seen: the handler and
///   what it awaits, not a task it spawns.
/// - A call let through because the store failed (`on_error = "allow"`)
///   reports nothing: no store state was read.
/// - A call whose permits `refund_on = "err"` gave back reports the key's
///   state after the refund.
/// - A function in dry run reports nothing: a trial enforces nothing, and a
///   client pacing by its fields would slow down for a limit not in force
///   ([`dry_run_fields`](Self::dry_run_fields) to report it). No allowed
///   response is told `Retry-After`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use axum::{body::Body, extract::Request, routing::get, Router};
/// use redlimit::http::DecisionHeadersLayer;
/// use redlimit::rate_limit;
/// use tower_service::Service;
///
/// #[rate_limit(name = "search", algo = "fixed_window", strategies = "2/1h")]
/// async fn search() -> Result<&'static str, redlimit::RateLimited> {
///     Ok("results")
/// }
///
/// async fn handler() -> Result<&'static str, redlimit::RateLimited> {
///     search().await
/// }
///
/// redlimit::init(redlimit::Store::memory())?;
/// let mut app = Router::new().route("/", get(handler)).layer(DecisionHeadersLayer::new());
/// let request = || Request::builder().uri("/").body(Body::empty()).unwrap();
///
/// let allowed = app.call(request()).await?;
/// assert_eq!(allowed.status(), 200);
/// assert_eq!(allowed.headers()["ratelimit-policy"], r#""2/1h";q=2;w=3600"#);
/// assert_eq!(allowed.headers()["ratelimit"], r#""2/1h";r=1;t=3600"#);
/// app.call(request()).await?;
/// let denied = app.call(request()).await?;
/// assert_eq!(denied.status(), 429);
/// assert_eq!(denied.headers()["retry-after"], "3600");
/// assert_eq!(denied.headers().get_all("ratelimit").iter().count(), 1, "the denial's own fields");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct DecisionHeadersLayer {
    dry_run_fields: bool,
}

impl DecisionHeadersLayer {
    /// The layer.
    pub fn new() -> DecisionHeadersLayer {
        DecisionHeadersLayer::default()
    }

    /// Whether the functions in dry run report their fields too (default
    /// false: a trial is invisible to clients), as
    /// [`RateLimitLayer::dry_run_fields`](crate::http::RateLimitLayer::dry_run_fields) does.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::DecisionHeadersLayer;
    /// use redlimit::rate_limit;
    /// use tower_service::Service;
    ///
    /// #[rate_limit(name = "export", algo = "fixed_window", strategies = "1/1h", dry_run = true)]
    /// async fn export() -> Result<&'static str, redlimit::RateLimited> {
    ///     Ok("exported")
    /// }
    ///
    /// redlimit::init(redlimit::Store::memory())?;
    /// let route = || Router::new().route("/", get(|| async { export().await }));
    /// let request = || Request::builder().uri("/").body(Body::empty()).unwrap();
    /// let mut hidden = route().layer(DecisionHeadersLayer::new());
    /// assert_eq!(hidden.call(request()).await?.headers().get("ratelimit"), None);
    /// let mut shown = route().layer(DecisionHeadersLayer::new().dry_run_fields(true));
    /// let would_deny = shown.call(request()).await?;
    /// assert_eq!((would_deny.status().as_u16(), would_deny.headers().get("retry-after")), (200, None));
    /// assert_eq!(would_deny.headers()["ratelimit"], r#""1/1h";r=0;t=3600"#);
    /// # Ok(()) }
    /// ```
    pub fn dry_run_fields(mut self, on: bool) -> DecisionHeadersLayer {
        self.dry_run_fields = on;
        self
    }
}

impl<S> tower_layer::Layer<S> for DecisionHeadersLayer {
    type Service = DecisionHeadersService<S>;

    fn layer(&self, inner: S) -> DecisionHeadersService<S> {
        // The core tells the observer of every admitted call; this records it.
        let _ = crate::site::OBSERVER.set(record);
        DecisionHeadersService { inner, dry_run_fields: self.dry_run_fields }
    }
}

/// The service [`DecisionHeadersLayer`] wraps around a route (the
/// layer's example shows it at work).
///
/// ```
/// use redlimit::http::{DecisionHeadersLayer, DecisionHeadersService};
/// use tower_layer::Layer;
///
/// let route: axum::routing::MethodRouter = axum::routing::get(|| async { "ok" });
/// let wrapped: DecisionHeadersService<_> = DecisionHeadersLayer::new().layer(route);
/// # let _ = wrapped;
/// ```
#[derive(Debug, Clone)]
pub struct DecisionHeadersService<S> {
    inner: S,
    dry_run_fields: bool,
}

impl<S, B, R> tower_service::Service<Request<B>> for DecisionHeadersService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    R: 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // Counted from before the inner call to when the response is written (or the future dropped).
        let live = LIVE.enter();
        let recorded = Recorded::default();
        // In scope both while the inner service is called and while its future runs.
        let future = DECISIONS.sync_scope(recorded.clone(), || self.inner.call(request));
        let future = DECISIONS.scope(recorded.clone(), future);
        let dry_run_fields = self.dry_run_fields;
        Box::pin(async move {
            let _live = live;
            let mut response = future.await?;
            let recorded = std::mem::take(&mut *recorded.lock().unwrap_or_else(PoisonError::into_inner));
            write(&mut response, &recorded, dry_run_fields);
            Ok(response)
        })
    }
}

/// Writes the fields of every recorded decision, one set of items per
/// limiter (a limiter in dry run's only when `dry_run_fields`), after any
/// the response already states (an inner `RateLimitLayer`'s), unless the
/// response is a denial with its own.
fn write<R>(response: &mut Response<R>, recorded: &[(Limiter, Decision)], dry_run_fields: bool) {
    if response.status() == StatusCode::TOO_MANY_REQUESTS && response.headers().contains_key(RATELIMIT) {
        return;
    }
    for (limiter, decision) in recorded.iter().filter(|(limiter, _)| dry_run_fields || !limiter.is_dry_run()) {
        let mut fields = rate_limit_headers(limiter.policy(), decision, HeaderStyle::Draft);
        // Every recorded call was let through: a trial's would-be denial names a wait nobody must keep.
        fields.remove(RETRY_AFTER);
        merge_rate_limit_fields(response.headers_mut(), &fields);
    }
}
