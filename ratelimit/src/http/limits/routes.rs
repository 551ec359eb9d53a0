//! [`RouteLimits`] and [`RateLimitLayer::per_route`]: a limit for every
//! route of a router, as flask-limiter's `default_limits`. One limiter
//! counts each route apart (its key starts with the matched route), by a
//! default policy unless the route states its own (`per_route.rs` decides).

use super::per_route::PerRoute;
use super::source::{LimiterSource, OnStore};
use super::Limits;
use crate::error::Error;
use crate::global::lazy::LazyLimiter;
use crate::http::layer::RateLimitLayer;
use crate::limiter::enforcement::Enforcement;
use crate::policy::Policy;
use crate::store::Store;
use std::borrow::Cow;
use std::sync::Arc;

/// The limits of a [`RateLimitLayer::per_route`] layer: a default policy
/// that every route gets on its own, and the routes that state another
/// policy or are exempt.
///
/// A route is the one axum matched (its
/// [`MatchedPath`](axum::extract::MatchedPath), not the request's path),
/// so `/users/1` and `/users/2` share the count of `/users/{id}`.
/// Name routes as `Router::route` was given them (a nested router's with
/// its prefix); a name that does not start with `/`, or a route stated
/// twice, is an error of `per_route`. One limiter counts every route: its
/// keys are the route's path, escaped, then `|` and the client's key, so no
/// path or key a client sends can share or split a route's count. A
/// route's `RateLimit-Policy` and `RateLimit` fields, and its 429, describe
/// the policy that decided it.
///
/// Axum sets the matched route when its router picks one, so the layer
/// must be inside the router (`Router::layer`, or `Router::route_layer`,
/// which unmatched requests never reach): wrapped around it, the layer
/// sees no route and counts every request as unmatched.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use axum::{body::Body, extract::Request, routing::get, Router};
/// use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits};
/// use redlimit::{ManualClock, Policy, Store};
/// use tower_service::Service;
///
/// redlimit::init(Store::memory().with_clock(ManualClock::new()))?;
/// let routes = RouteLimits::new(Policy::fixed_window("2/1m")?).exempt("/health");
/// let layer = RateLimitLayer::per_route("api", routes)?.key(KeyBy::header("x-api-key")?);
/// let ok = || async { "ok" };
/// let mut app =
///     Router::new().route("/users/{id}", get(ok)).route("/orders", get(ok)).route("/health", get(ok)).layer(layer);
/// let get = |path: &str| Request::builder().uri(path).header("x-api-key", "k").body(Body::empty()).unwrap();
///
/// assert_eq!(app.call(get("/users/1")).await.unwrap().headers()["ratelimit"], r#""2/1m";r=1;t=60"#);
/// assert_eq!(app.call(get("/users/2")).await.unwrap().status(), 200); // the same route
/// assert_eq!(app.call(get("/users/3")).await.unwrap().status(), 429);
/// let orders = app.call(get("/orders")).await.unwrap(); // a count of its own
/// assert_eq!(orders.headers()["ratelimit"], r#""2/1m";r=1;t=60"#);
/// assert_eq!(app.call(get("/health")).await.unwrap().headers().get("ratelimit"), None);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RouteLimits {
    default: Policy,
    /// Each stated route and its policy (`None`: exempt).
    routes: Vec<(String, Option<Policy>)>,
    limit_unmatched: bool,
}

impl RouteLimits {
    /// Every route limited by `default`, each on its own; a request that
    /// matched no route is counted by it too, all such requests of a
    /// client in one count (see [`exempt_unmatched`](Self::exempt_unmatched)).
    pub fn new(default: Policy) -> RouteLimits {
        RouteLimits { default, routes: Vec::new(), limit_unmatched: true }
    }

    /// Route `path` is limited by `policy` instead of the default (and not
    /// also by it), still counted on its own under the layer's limiter.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits};
    /// use redlimit::{ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let routes = RouteLimits::new(Policy::fixed_window("100/1m")?).route("/search", Policy::fixed_window("1/1m")?);
    /// let layer = RateLimitLayer::per_route_on("api", &store, routes)?.key(KeyBy::header("x-api-key")?);
    /// let mut app = Router::new().route("/search", get(|| async { "results" })).layer(layer);
    /// let search = || Request::builder().uri("/search").header("x-api-key", "k").body(Body::empty()).unwrap();
    ///
    /// assert_eq!(app.call(search()).await.unwrap().headers()["ratelimit-policy"], r#""1/1m";q=1;w=60"#);
    /// let denied = app.call(search()).await.unwrap();
    /// assert_eq!(denied.status(), 429);
    /// assert_eq!(denied.headers()["ratelimit"], r#""1/1m";r=0;t=60"#);
    /// # Ok(()) }
    /// ```
    pub fn route(self, path: impl Into<String>, policy: Policy) -> RouteLimits {
        self.with(path.into(), Some(policy))
    }

    /// Route `path` is not limited by this layer: its requests pass
    /// uncounted and without `RateLimit` fields, before their key is looked
    /// for. For health checks, and for a route that carries its own
    /// [`RateLimitLayer`]: a router's layer runs before a route's own and
    /// cannot see it, so exempt the route here to have it limited by its
    /// own layer alone.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits};
    /// use redlimit::{Policy, Store};
    /// use tower_service::Service;
    ///
    /// let routes = RouteLimits::new(Policy::fixed_window("1/1m")?).exempt("/health");
    /// let layer = RateLimitLayer::per_route_on("api", &Store::memory(), routes)?.key(KeyBy::header("x-api-key")?);
    /// let mut app = Router::new().route("/health", get(|| async { "ok" })).layer(layer);
    ///
    /// for _ in 0..3 {
    ///     // No key needed either.
    ///     let health = app.call(Request::builder().uri("/health").body(Body::empty()).unwrap()).await.unwrap();
    ///     assert_eq!((health.status().as_u16(), health.headers().get("ratelimit")), (200, None));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn exempt(self, path: impl Into<String>) -> RouteLimits {
        self.with(path.into(), None)
    }

    /// Requests that matched no route (axum's 404s and fallbacks, a service
    /// nested with `nest_service`) pass uncounted; by default they are
    /// counted by the default policy, each client's in one count, so a
    /// client cannot escape the limit on unrouted paths.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits};
    /// use redlimit::{Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory();
    /// let app = |routes: RouteLimits| -> Result<Router, redlimit::Error> {
    ///     let layer = RateLimitLayer::per_route_on("api", &store, routes)?.key(KeyBy::header("x-api-key")?);
    ///     Ok(Router::new().route("/", get(|| async { "hi" })).layer(layer))
    /// };
    /// let get = |path: &str| Request::builder().uri(path).header("x-api-key", "k").body(Body::empty()).unwrap();
    ///
    /// let mut counted = app(RouteLimits::new(Policy::fixed_window("1/1m")?))?;
    /// assert_eq!(counted.call(get("/nothing")).await.unwrap().status(), 404);
    /// assert_eq!(counted.call(get("/nothing/else")).await.unwrap().status(), 429); // one count for all
    ///
    /// let mut open = app(RouteLimits::new(Policy::fixed_window("1/1m")?).exempt_unmatched())?;
    /// for _ in 0..3 {
    ///     assert_eq!(open.call(get("/elsewhere")).await.unwrap().status(), 404);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn exempt_unmatched(mut self) -> RouteLimits {
        self.limit_unmatched = false;
        self
    }

    fn with(mut self, path: String, policy: Option<Policy>) -> RouteLimits {
        self.routes.push((path, policy));
        self
    }
}

impl RateLimitLayer {
    /// A layer over a whole router giving every route its own count, by
    /// the default policy of `routes` unless the route states another or is
    /// exempt (see [`RouteLimits`]: what one route is, its keys, unmatched
    /// requests), under the limiter name `name` on the global store,
    /// resolved at the first request. An error names what is wrong with the routes.
    ///
    /// ```
    /// use redlimit::http::{RateLimitLayer, RouteLimits};
    /// use redlimit::Policy;
    ///
    /// let routes = RouteLimits::new(Policy::fixed_window("100/1m")?).route("/search", Policy::fixed_window("10/1m")?);
    /// let layer = RateLimitLayer::per_route("api", routes)?;
    /// let relative = RouteLimits::new(Policy::fixed_window("100/1m")?).exempt("health");
    /// let error = RateLimitLayer::per_route("api", relative).err().unwrap().to_string();
    /// assert!(error.contains("`health` is no route's path"), "{error}");
    /// # let _ = layer;
    /// # Ok::<(), redlimit::Error>(())
    /// ```
    pub fn per_route(name: impl Into<Arc<str>>, routes: RouteLimits) -> Result<RateLimitLayer, Error> {
        let name: Arc<str> = name.into();
        let lazy = LazyLimiter::fixed(Cow::Owned(name.to_string()), routes.default.clone(), Enforcement::DEFAULT);
        let per_route = PerRoute::new(LimiterSource::Lazy(Arc::new(lazy)), routes.routes, routes.limit_unmatched)?;
        Ok(RateLimitLayer::with_limits(Limits::PerRoute(Arc::new(per_route))))
    }

    /// [`per_route`](Self::per_route) on `store` instead of the global
    /// store: every route is counted under the limiter name `name`, by its
    /// own policy or the default of `routes`, and a store failure is settled
    /// by the layer's [`on_error`](Self::on_error).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits};
    /// use redlimit::{Limiter, ManualClock, OnError, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let layer = RateLimitLayer::per_route_on("api", &store, RouteLimits::new(Policy::fixed_window("1/1m")?))?
    ///     .key(KeyBy::header("x-api-key")?)
    ///     .on_error(OnError::Deny);
    /// let mut app = Router::new().route("/a", get(|| async { "a" })).route("/b", get(|| async { "b" })).layer(layer);
    /// let get = |path: &str| Request::builder().uri(path).header("x-api-key", "k").body(Body::empty()).unwrap();
    ///
    /// assert_eq!(app.call(get("/a")).await.unwrap().status(), 200);
    /// assert_eq!(app.call(get("/a")).await.unwrap().status(), 429);
    /// assert_eq!(app.call(get("/b")).await.unwrap().status(), 200); // `/a` spent only its own
    /// // Counted on `store` under `api`, keyed by the escaped route, `|`, then the client's key.
    /// let api = Limiter::new("api", Policy::fixed_window("1/1m")?, &store);
    /// assert_eq!(api.peek("%2Fb|k", 0).await?.remaining, 0);
    /// # Ok(()) }
    /// ```
    pub fn per_route_on(
        name: impl Into<Arc<str>>,
        store: &Store,
        routes: RouteLimits,
    ) -> Result<RateLimitLayer, Error> {
        let on_store = OnStore::new(name.into(), store).with_default(routes.default);
        let per_route =
            PerRoute::new(LimiterSource::OnStore(Arc::new(on_store)), routes.routes, routes.limit_unmatched)?;
        Ok(RateLimitLayer::with_limits(Limits::PerRoute(Arc::new(per_route))))
    }
}
