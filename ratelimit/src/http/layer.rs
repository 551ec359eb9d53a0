//! [`RateLimitLayer`]: a tower layer that limits any route by a request key
//! (its options and where its limiter comes from; `service.rs` decides).

use super::cost::RequestCost;
use super::fields::headers::HeaderStyle;
use super::fields::quota::QuotaUnit;
use super::key::{KeyBy, MissingKey};
use super::limits::per_request::PerRequest;
use super::limits::source::{LimiterSource, OnStore};
use super::limits::tiers::Tiers;
use super::limits::Limits;
use super::service::{RateLimitService, Shared};
use super::TrustedProxies;
use crate::error::Error;
use crate::global::lazy::LazyLimiter;
use crate::limiter::enforcement::Enforcement;
use crate::limiter::on_error::OnError;
use crate::limiter::Limiter;
use crate::policy::Policy;
use crate::store::Store;
use axum::extract::Request;
use std::borrow::{Borrow, Cow};
use std::sync::Arc;

/// A tower [`Layer`](tower_layer::Layer) that limits every request of the
/// routes it wraps by a key (client IP by default).
///
/// Cheap to clone: clones share one limiter. Built with [`new`](Self::new),
/// it runs on the global store ([`crate::global`](crate::global()), `REDLIMIT_REDIS_URL` or
/// [`crate::init`]), resolved at the first request; with
/// [`from_limiter`](Self::from_limiter), on that limiter.
///
/// A denied request gets the response of
/// [`denial_response`](super::denial_response) (429, `Retry-After`,
/// `RateLimit-Policy`, `RateLimit`, problem+json) and never reaches the
/// route; an allowed one carries the same header fields unless
/// [`headers_on_allowed(false)`](Self::headers_on_allowed). When the store
/// cannot decide, the limiter's [`OnError`] applies (503 under `Deny`).
/// [`exempt`](Self::exempt) lets chosen requests through uncounted,
/// [`on_rejected`](Self::on_rejected) builds your own response to a denial,
/// [`cost_by`](Self::cost_by) charges each request a cost computed from it,
/// [`tiered`](Self::tiered) chooses the policy per request among tiers,
/// [`per_request`](Self::per_request) computes it from the request, and
/// [`per_route`](Self::per_route) gives every route of a router its own limit.
///
/// Under a [`Policy::concurrency`] (however the request's policy is chosen)
/// a request holds a permit while the route handles it and its response is
/// sent: taken before the route is called and given back when the
/// response's body ends (before its last frame is handed on), with an
/// error, or when the route's future or the body is dropped unfinished
/// (the client went away, a timeout). A streamed body holds its permit
/// until it ends. A denial is the usual
/// 429 without `Retry-After` (no time can be named), and the fields count
/// requests in flight (see [`rate_limit_headers`](super::rate_limit_headers)
/// and [`from_limiter`](Self::from_limiter)'s example).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use axum::{body::Body, extract::Request, routing::get, Router};
/// use redlimit::http::{KeyBy, RateLimitLayer};
/// use redlimit::{Limiter, ManualClock, Policy, Store};
/// use tower_service::Service;
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("api", Policy::fixed_window("2/1m")?, &store);
/// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?);
/// let mut app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
///
/// let request = || Request::builder().uri("/").header("x-api-key", "k1").body(Body::empty()).unwrap();
/// let ok = app.call(request()).await.unwrap();
/// assert_eq!(ok.status(), 200);
/// assert_eq!(ok.headers()["ratelimit"], r#""2/1m";r=1;t=60"#);
/// app.call(request()).await.unwrap();
/// let denied = app.call(request()).await.unwrap();
/// assert_eq!(denied.status(), 429);
/// assert_eq!(denied.headers()["retry-after"], "60");
///
/// // No key: rejected by default.
/// let anonymous = app.call(Request::builder().uri("/").body(Body::empty()).unwrap()).await.unwrap();
/// assert_eq!(anonymous.status(), 400);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    pub(super) shared: Arc<Shared>,
}

impl RateLimitLayer {
    /// A layer applying `policy` under the limiter name `name` on the global
    /// store, resolved at the first request. Keys by client IP, no trusted proxy.
    pub fn new(name: impl Into<Arc<str>>, policy: Policy) -> RateLimitLayer {
        let name: Arc<str> = name.into();
        let name = Cow::Owned(name.to_string());
        RateLimitLayer::with_source(LimiterSource::Lazy(Arc::new(LazyLimiter::fixed(
            name,
            policy,
            Enforcement::DEFAULT,
        ))))
    }

    /// A layer applying the configured policy named `policy` (see
    /// [`crate::policies`]) under the limiter name `name` on the global
    /// store. A [`reload`](crate::policies::reload) that changes the policy
    /// applies from the next request, keeping the counts that still fit. A
    /// policy that is not configured lets requests through uncounted (with a
    /// WARN each time), or answers 503 under [`OnError::Deny`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use tower_service::Service;
    ///
    /// redlimit::policies::load_str("inline", "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"2/1h\"\n")?;
    /// let layer = RateLimitLayer::named("search", "search").key(KeyBy::header("x-api-key")?);
    /// let mut app = Router::new().route("/", get(|| async { "results" })).layer(layer);
    /// let request = || Request::builder().uri("/").header("x-api-key", "k1").body(Body::empty()).unwrap();
    ///
    /// assert_eq!(app.call(request()).await?.headers()["ratelimit-policy"], r#""search";q=2;w=3600"#);
    /// redlimit::policies::load_str("inline", "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"5/1h\"\n")?;
    /// let raised = app.call(request()).await?;
    /// assert_eq!(raised.headers()["ratelimit"], r#""search";r=3;t=3600"#); // the first request still counts
    /// # Ok(()) }
    /// ```
    pub fn named(name: impl Into<Arc<str>>, policy: impl Into<String>) -> RateLimitLayer {
        let name: Arc<str> = name.into();
        let (name, policy) = (Cow::Owned(name.to_string()), Cow::Owned(policy.into()));
        RateLimitLayer::with_source(LimiterSource::Lazy(Arc::new(LazyLimiter::named(
            name,
            policy,
            Enforcement::DEFAULT,
        ))))
    }

    /// A layer deciding on `limiter` (its store, its [`OnError`]).
    ///
    /// At most one export at a time per API key: a second one is denied
    /// while the first is in flight, and passes once it is done.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, Policy, Store};
    /// use std::sync::Arc;
    /// use tokio::sync::Semaphore;
    /// use tower_service::Service;
    ///
    /// // The route says when it started, and finishes when told to.
    /// let (started, finish) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
    /// let export = {
    ///     let (started, finish) = (started.clone(), finish.clone());
    ///     move || async move {
    ///         started.add_permits(1);
    ///         finish.acquire().await.unwrap().forget();
    ///         "exported"
    ///     }
    /// };
    /// let limiter = Limiter::new("exports", Policy::concurrency(1, "30s")?, &Store::memory());
    /// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?);
    /// let app = Router::new().route("/", get(export)).layer(layer);
    /// let request = || Request::builder().uri("/").header("x-api-key", "k1").body(Body::empty()).unwrap();
    ///
    /// let first = tokio::spawn({
    ///     let mut app = app.clone();
    ///     async move { app.call(request()).await.unwrap() }
    /// });
    /// started.acquire().await.unwrap().forget(); // the first is in flight
    /// let busy = app.clone().call(request()).await.unwrap();
    /// assert_eq!(busy.status(), 429);
    /// assert_eq!(busy.headers()["ratelimit-policy"], r#""concurrency 1";q=1;qu="concurrent-requests""#);
    /// assert_eq!(busy.headers()["ratelimit"], r#""concurrency 1";r=0"#);
    /// assert!(busy.headers().get("retry-after").is_none(), "a permit frees when a request ends");
    ///
    /// finish.add_permits(2); // the first finishes, and so will the next
    /// assert_eq!(first.await.unwrap().status(), 200);
    /// assert_eq!(app.clone().call(request()).await.unwrap().status(), 200);
    /// # Ok(()) }
    /// ```
    pub fn from_limiter(limiter: Limiter) -> RateLimitLayer {
        RateLimitLayer::with_source(LimiterSource::Limiter(limiter))
    }

    /// A layer choosing each request's policy among `tiers` (plans such as
    /// free and pro), each tier counted apart under `<name>.<tier>`; see
    /// [`Tiers`] for an unknown tier. Every other option applies to all tiers.
    /// An error names what is wrong with the tiers.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer, TierBy, Tiers};
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let tiers = Tiers::new(TierBy::header("x-plan")?)
    ///     .tier_limiter("free", Limiter::new("api.free", Policy::fixed_window("1/1m")?, &store))
    ///     .tier_limiter("pro", Limiter::new("api.pro", Policy::fixed_window("3/1m")?, &store));
    /// let layer = RateLimitLayer::tiered("api", tiers)?.key(KeyBy::header("x-api-key")?);
    /// let mut app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
    /// let request = |plan: &str| {
    ///     Request::builder().uri("/").header("x-api-key", "k1").header("x-plan", plan).body(Body::empty()).unwrap()
    /// };
    ///
    /// assert_eq!(app.call(request("free")).await.unwrap().status(), 200);
    /// assert_eq!(app.call(request("free")).await.unwrap().status(), 429);
    /// let pro = app.call(request("pro")).await.unwrap(); // its own count
    /// assert_eq!(pro.headers()["ratelimit"], r#""3/1m";r=2;t=60"#);
    /// assert_eq!(app.call(request("gold")).await.unwrap().status(), 400); // no such tier, no fallback
    /// # Ok(()) }
    /// ```
    pub fn tiered(name: impl Into<Arc<str>>, tiers: Tiers) -> Result<RateLimitLayer, Error> {
        let name: Arc<str> = name.into();
        Ok(RateLimitLayer::with_limits(Limits::Tiered(Arc::new(tiers.build(&name)?))))
    }

    /// A layer deciding each request by the policy `policy_of` computes from
    /// it (typically the caller's plan, which an authentication layer before
    /// this one put in a request extension), under the limiter name `name`
    /// on the global store, resolved at the first request. `policy_of` may
    /// return a [`Policy`], an `Arc<Policy>` or a `&'static Policy`.
    ///
    /// One limiter counts every request, so a key keeps its count when its
    /// policy changes to another of the same algorithm (a user upgraded from
    /// 2 to 5 a minute keeps what they used), and `RateLimit-Policy` and
    /// `RateLimit` describe the policy that decided that request.
    ///
    /// A request for which `policy_of` returns `None` never reaches the
    /// route: it is answered a plain `500`, and the first one is logged at
    /// ERROR, since it means the server is set up wrong (the layer that sets
    /// what `policy_of` reads is missing, or runs after this one). To count
    /// requests without a plan under a default policy, return that policy
    /// for them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, middleware, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{ManualClock, Policy, Store};
    /// use std::sync::Arc;
    /// use tower_service::Service;
    ///
    /// /// What authentication found out about the caller.
    /// #[derive(Clone)]
    /// struct Plan(Arc<Policy>);
    ///
    /// redlimit::init(Store::memory().with_clock(ManualClock::new()))?;
    /// let (free, pro) = (Arc::new(Policy::fixed_window("1/1m")?), Arc::new(Policy::fixed_window("3/1m")?));
    /// let limit = RateLimitLayer::per_request("api", |request: &Request| {
    ///     request.extensions().get::<Plan>().map(|plan| plan.0.clone())
    /// })
    /// .key(KeyBy::header("x-user")?);
    /// // Stands for authentication: bob pays, anyone else named is free, no name has no plan.
    /// let authenticate = middleware::map_request(move |mut request: Request| {
    ///     let plan = match request.headers().get("x-user").map(|user| user == "bob") {
    ///         Some(true) => Some(Plan(pro.clone())),
    ///         Some(false) => Some(Plan(free.clone())),
    ///         None => None,
    ///     };
    ///     if let Some(plan) = plan {
    ///         request.extensions_mut().insert(plan);
    ///     }
    ///     async move { request }
    /// });
    /// // The layer added last runs first.
    /// let mut app = Router::new().route("/", get(|| async { "hi" })).layer(limit).layer(authenticate);
    /// let request = |user: &str| Request::builder().uri("/").header("x-user", user).body(Body::empty()).unwrap();
    ///
    /// let ann = app.call(request("ann")).await.unwrap();
    /// assert_eq!(ann.headers()["ratelimit-policy"], r#""1/1m";q=1;w=60"#);
    /// assert_eq!(app.call(request("ann")).await.unwrap().status(), 429);
    /// let bob = app.call(request("bob")).await.unwrap();
    /// assert_eq!(bob.headers()["ratelimit"], r#""3/1m";r=2;t=60"#);
    /// let anonymous = Request::builder().uri("/").body(Body::empty()).unwrap();
    /// assert_eq!(app.call(anonymous).await.unwrap().status(), 500); // no plan: set up wrong
    /// # Ok(()) }
    /// ```
    pub fn per_request<P: Borrow<Policy>>(
        name: impl Into<Arc<str>>,
        policy_of: impl Fn(&Request) -> Option<P> + Send + Sync + 'static,
    ) -> RateLimitLayer {
        let name: Arc<str> = name.into();
        let source =
            LimiterSource::Lazy(Arc::new(LazyLimiter::per_call(Cow::Owned(name.to_string()), Enforcement::DEFAULT)));
        RateLimitLayer::with_limits(Limits::PerRequest(Arc::new(PerRequest::new(source, policy_of))))
    }

    /// [`per_request`](Self::per_request) on `store` instead of the global
    /// store: requests are counted under the limiter name `name`, each by
    /// the policy `policy_of` gives it, and a store failure is settled by
    /// the layer's [`on_error`](Self::on_error).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let layer = RateLimitLayer::per_request_on("api", &store, |request: &Request| request.extensions().get::<Policy>().cloned())
    ///     .key(KeyBy::header("x-user")?);
    /// let mut app = Router::new().route("/", get(|| async { "hi" })).layer(layer);
    /// let request = |policy: &Policy| {
    ///     let mut request = Request::builder().uri("/").header("x-user", "ann").body(Body::empty()).unwrap();
    ///     request.extensions_mut().insert(policy.clone());
    ///     request
    /// };
    /// let (free, pro) = (Policy::fixed_window("2/1m")?, Policy::fixed_window("5/1m")?);
    ///
    /// app.call(request(&free)).await.unwrap();
    /// app.call(request(&free)).await.unwrap();
    /// assert_eq!(app.call(request(&free)).await.unwrap().status(), 429);
    /// let upgraded = app.call(request(&pro)).await.unwrap();
    /// assert_eq!(upgraded.headers()["ratelimit"], r#""5/1m";r=2;t=60"#); // the two used still count
    /// # Ok(()) }
    /// ```
    pub fn per_request_on<P: Borrow<Policy>>(
        name: impl Into<Arc<str>>,
        store: &Store,
        policy_of: impl Fn(&Request) -> Option<P> + Send + Sync + 'static,
    ) -> RateLimitLayer {
        let source = LimiterSource::OnStore(Arc::new(OnStore::new(name.into(), store)));
        RateLimitLayer::with_limits(Limits::PerRequest(Arc::new(PerRequest::new(source, policy_of))))
    }

    fn with_source(source: LimiterSource) -> RateLimitLayer {
        RateLimitLayer::with_limits(Limits::One(source))
    }

    pub(super) fn with_limits(limits: Limits) -> RateLimitLayer {
        let shared = Shared {
            limits,
            key: KeyBy::client_ip(TrustedProxies::none()),
            cost: RequestCost::Fixed(1),
            unit: QuotaUnit::Requests,
            missing_key: MissingKey::default(),
            headers_on_allowed: true,
            style: HeaderStyle::default(),
            told_missing_peer: Arc::default(),
            on_error: OnError::Allow,
            dry_run: false,
            dry_run_fields: false,
            exempt: Vec::new(),
            on_rejected: None,
            refund_on: None,
            priority: None,
        };
        RateLimitLayer { shared: Arc::new(shared) }
    }
}

impl<S> tower_layer::Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> RateLimitService<S> {
        RateLimitService::new(inner, self.shared.clone())
    }
}
