//! [`RateLimitService`]: what a [`RateLimitLayer`](super::RateLimitLayer)
//! does with each request: find its key, ask the limiter, answer or call the
//! route and add the header fields.

use super::headers::{insert_rate_limit_headers, HeaderStyle};
use super::key::{KeyBy, MissingKey};
use super::response::{problem, respond};
use crate::lazy::LazyLimiter;
use crate::{Decision, Limiter};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Everything a layer's services share.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) source: Source,
    pub(super) key: KeyBy,
    pub(super) cost: u64,
    pub(super) missing_key: MissingKey,
    pub(super) headers_on_allowed: bool,
    pub(super) style: HeaderStyle,
    /// Whether the missing `ConnectInfo` was already logged.
    pub(super) told_missing_peer: Arc<AtomicBool>,
}

/// Where a layer's limiter comes from.
#[derive(Clone)]
pub(super) enum Source {
    /// Given, with its own store and `OnError`.
    Limiter(Limiter),
    /// Built on the global store at the first request.
    Lazy(Arc<LazyLimiter>),
}

/// The service [`RateLimitLayer`](super::RateLimitLayer) wraps around a route.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use axum::{body::Body, extract::Request, routing::get, Router};
/// use redlimit::http::{KeyBy, RateLimitLayer, RateLimitService};
/// use redlimit::{Limiter, Policy, Store};
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// let limiter = Limiter::new("api", Policy::fixed_window("1/1m")?, &Store::memory());
/// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?);
/// let mut service: RateLimitService<Router> = layer.layer(Router::new().route("/", get(|| async { "hi" })));
/// let request = || Request::builder().uri("/").header("x-api-key", "k").body(Body::empty()).unwrap();
/// assert_eq!(service.call(request()).await.unwrap().status(), 200);
/// assert_eq!(service.call(request()).await.unwrap().status(), 429);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimitService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> RateLimitService<S> {
    pub(super) fn new(inner: S, shared: Arc<Shared>) -> RateLimitService<S> {
        RateLimitService { inner, shared }
    }
}

/// What the limit says about one request.
enum Verdict {
    /// Call the route; add the header fields of this decision (under this
    /// limiter's policy) when there is one.
    Pass(Option<(Decision, Limiter)>),
    /// Answer this instead of calling the route.
    Respond(Response),
}

impl Shared {
    fn name(&self) -> &str {
        match &self.source {
            Source::Limiter(limiter) => limiter.name(),
            Source::Lazy(lazy) => lazy.name(),
        }
    }

    /// The limiter deciding now; `Err` when a named policy is not configured.
    async fn limiter(&self) -> Result<Limiter, Arc<str>> {
        match &self.source {
            Source::Limiter(limiter) => Ok(limiter.clone()),
            Source::Lazy(lazy) => lazy.current().await.map(|(limiter, _)| limiter),
        }
    }

    /// The request's key; `Ok(None)` to let it through uncounted, `Err`
    /// to answer it with this status and detail. (Synchronous: a request
    /// body is not `Sync`, so `&Request` cannot live across an await.)
    fn key_of(&self, request: &Request) -> Result<Option<Vec<u8>>, (StatusCode, String)> {
        match self.key.key(request) {
            Ok(Some(key)) => Ok(Some(key)),
            Ok(None) => match self.missing_key {
                MissingKey::Allow => Ok(None),
                MissingKey::Reject => {
                    let detail = format!(
                        "this route is rate limited by `{}` per {}, and the request has none",
                        self.name(),
                        self.key.describe()
                    );
                    Err((StatusCode::BAD_REQUEST, detail))
                }
            },
            Err(missing) => {
                if !self.told_missing_peer.swap(true, Ordering::Relaxed) {
                    tracing::error!(target: "redlimit", limiter = %self.name(), "{missing}");
                }
                // The operator reads the log; the client learns only that the server failed.
                Err((StatusCode::INTERNAL_SERVER_ERROR, String::new()))
            }
        }
    }

    async fn decide(&self, key: Vec<u8>) -> Verdict {
        let limiter = match self.limiter().await {
            Ok(limiter) => limiter,
            Err(why) => return self.without_policy(&why, &key),
        };
        match limiter.limit(&key, self.cost).await {
            // A decision with nothing to reset was not made by a store (the
            // store failed and `on_error = allow` let the call through): it
            // says nothing true about the limit, so no header fields.
            Ok(decision) if decision.reset_after.is_zero() => Verdict::Pass(None),
            Ok(decision) => Verdict::Pass(Some((decision, limiter))),
            Err(denied) => Verdict::Respond(respond(&denied, Some(limiter.policy()), self.style)),
        }
    }

    /// A request whose named policy is not configured: settled by `on_error`
    /// as a store failure would be (503 under `Deny`, else through uncounted).
    fn without_policy(&self, why: &str, key: &[u8]) -> Verdict {
        let Source::Lazy(lazy) = &self.source else { return Verdict::Pass(None) };
        match lazy.settle_unconfigured("request", lazy.name(), why, key) {
            Ok(()) => Verdict::Pass(None),
            Err(_) => {
                let detail = format!(
                    "the named policy of rate limiter `{}` is not configured, so the request could not be decided",
                    self.name()
                );
                Verdict::Respond(problem(StatusCode::SERVICE_UNAVAILABLE, &detail, None))
            }
        }
    }
}

impl<S> tower_service::Service<Request> for RateLimitService<S>
where
    S: tower_service::Service<Request> + Clone + Send + 'static,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The clone left behind takes the next request; the one that was
        // polled ready serves this one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        let key = shared.key_of(&request);
        Box::pin(async move {
            let verdict = match key {
                Ok(Some(key)) => shared.decide(key).await,
                Ok(None) => Verdict::Pass(None),
                Err((status, detail)) => Verdict::Respond(problem(status, &detail, None)),
            };
            match verdict {
                Verdict::Respond(response) => Ok(response),
                Verdict::Pass(decision) => {
                    let mut response = inner.call(request).await?.into_response();
                    if let Some((decision, limiter)) = decision.filter(|_| shared.headers_on_allowed) {
                        insert_rate_limit_headers(response.headers_mut(), limiter.policy(), &decision, shared.style);
                    }
                    Ok(response)
                }
            }
        })
    }
}
