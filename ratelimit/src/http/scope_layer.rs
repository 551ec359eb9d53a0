//! [`ScopeLayer`]: every request a server handles runs in one
//! [`Scope`], since `axum::serve` handles each connection in a task
//! of its own, which no scope around the server reaches.

use crate::global::scope::Scope;
use crate::store::Store;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A tower [`Layer`](tower_layer::Layer) that runs every request it wraps
/// in a [`Scope`] of `store`: the `#[rate_limit]` functions its handlers
/// call and the layers built on the global store inside it decide on
/// `store`, as do the tasks a handler spawns through
/// [`in_current_scope`](crate::in_current_scope).
///
/// The way to test an app over real HTTP: the global store can be set only
/// once per process, and a scope around `axum::serve` does not reach the
/// tasks it spawns per connection. Add it outermost, so that every layer
/// runs inside it; the scope's limiters are shared by all its requests.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use axum::{body::Body, extract::Request, routing::get, Router};
/// use redlimit::http::ScopeLayer;
/// use redlimit::{rate_limit, Limiter, ManualClock, Policy, RateLimited, Store};
/// use tower_service::Service;
///
/// #[rate_limit(name = "search", algo = "fixed_window", strategies = "10/1h", key = "<user>")]
/// async fn search(user: &str) -> Result<&'static str, RateLimited> {
///     Ok("results")
/// }
///
/// async fn handler() -> Result<&'static str, RateLimited> {
///     // Indexed in the background, counted like the request itself.
///     tokio::spawn(redlimit::in_current_scope(async { search("ann").await.ok() })).await.ok();
///     search("ann").await
/// }
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let mut app = Router::new().route("/", get(handler)).layer(ScopeLayer::new(store.clone()));
/// let response = app.call(Request::builder().uri("/").body(Body::empty())?).await?;
/// assert_eq!(response.status(), 200);
///
/// // The test's store saw both calls (a peek answers as the next call would).
/// let search = Limiter::new("search", Policy::fixed_window("10/1h")?, &store);
/// assert_eq!(search.peek("ann", 1).await?.remaining, 10 - 2 - 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ScopeLayer {
    scope: Scope,
}

impl ScopeLayer {
    /// Runs every request in one scope of `store`.
    pub fn new(store: Store) -> ScopeLayer {
        ScopeLayer { scope: Scope::new(store) }
    }
}

impl<S> tower_layer::Layer<S> for ScopeLayer {
    type Service = ScopeService<S>;

    fn layer(&self, inner: S) -> ScopeService<S> {
        ScopeService { inner, scope: self.scope.clone() }
    }
}

/// The service [`ScopeLayer`] wraps around a route (the layer's example
/// shows it at work).
///
/// ```
/// use redlimit::http::{ScopeLayer, ScopeService};
/// use tower_layer::Layer;
///
/// let route: axum::routing::MethodRouter = axum::routing::get(|| async { "ok" });
/// let wrapped: ScopeService<_> = ScopeLayer::new(redlimit::Store::memory()).layer(route);
/// # let _ = wrapped;
/// ```
#[derive(Debug, Clone)]
pub struct ScopeService<S> {
    inner: S,
    scope: Scope,
}

impl<S, R> tower_service::Service<R> for ScopeService<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        // In scope both while the inner service is called and while its future runs.
        let future = self.scope.sync_run(|| self.inner.call(request));
        Box::pin(self.scope.run(future))
    }
}
