//! [`RouteLimits`]: a limit for every route of a router, as flask-limiter's
//! `default_limits`. One limiter counts each route apart (its key starts
//! with the matched route), by a default policy unless the route states its own.

use super::layer::RateLimitLayer;
use super::source::Source;
use super::tiers::{Chosen, Limits};
use crate::key::push_key_value;
use crate::lazy::LazyLimiter;
use crate::{Error, Limiter, OnError, Policy};
use axum::extract::{MatchedPath, Request};
use redlimit_grammar::quote;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// The limits of a [`RateLimitLayer::per_route`] layer: a default policy
/// that every route gets on its own, and the routes that state another
/// policy or are exempt.
///
/// A route is named by its path as written in `Router::route`
/// (`/users/{id}`, a nested router's route with its prefix), which is
/// what axum's [`MatchedPath`] says of a request. A name that does not
/// start with `/`, or a route stated twice, is an error of
/// [`per_route`](RateLimitLayer::per_route).
///
/// ```
/// use redlimit::http::{RateLimitLayer, RouteLimits};
/// use redlimit::Policy;
///
/// let routes = RouteLimits::new(Policy::fixed_window("100/1m")?)
///     .route("/search", Policy::fixed_window("10/1m")?)
///     .exempt("/health");
/// let layer = RateLimitLayer::per_route("api", routes)?;
///
/// let unnamed = RouteLimits::new(Policy::fixed_window("100/1m")?).exempt("health");
/// let error = RateLimitLayer::per_route("api", unnamed).err().unwrap().to_string();
/// assert!(error.contains("`health`") && error.contains("`/`"), "{error}");
/// # let _ = layer;
/// # Ok::<(), redlimit::Error>(())
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
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("api", Policy::fixed_window("100/1m")?, &store);
    /// let routes = RouteLimits::new(Policy::fixed_window("100/1m")?).route("/search", Policy::fixed_window("1/1m")?);
    /// let layer = RateLimitLayer::per_route_on(limiter, routes)?.key(KeyBy::header("x-api-key")?);
    /// let mut app = Router::new().route("/search", get(|| async { "results" })).layer(layer);
    /// let search = || Request::builder().uri("/search").header("x-api-key", "k").body(Body::empty()).unwrap();
    ///
    /// assert_eq!(app.call(search()).await.unwrap().headers()["ratelimit-policy"], r#""1/1m";q=1;w=60"#);
    /// let denied = app.call(search()).await.unwrap();
    /// assert_eq!((denied.status().as_u16(), denied.headers()["ratelimit"].to_str().unwrap()), (429, r#""1/1m";r=0;t=60"#));
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
    /// use redlimit::{Limiter, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let limiter = Limiter::new("api", Policy::fixed_window("1/1m")?, &Store::memory());
    /// let routes = RouteLimits::new(Policy::fixed_window("1/1m")?).exempt("/health");
    /// let layer = RateLimitLayer::per_route_on(limiter, routes)?.key(KeyBy::header("x-api-key")?);
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
    /// use redlimit::{Limiter, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory();
    /// let app = |routes: RouteLimits| -> Result<Router, redlimit::Error> {
    ///     let limiter = Limiter::new("api", Policy::fixed_window("1/1m")?, &store);
    ///     let layer = RateLimitLayer::per_route_on(limiter, routes)?.key(KeyBy::header("x-api-key")?);
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

    /// The routes' rules, each deciding on `base` (the layer's limiter,
    /// deciding by the default policy); an error names a route that is
    /// stated twice or is no route's path.
    fn build(self, base: Source) -> Result<PerRoute, Error> {
        let invalid = |why: String| Err(Error::InvalidConfig(format!("the routes of `{}`: {why}", quote(base.name()))));
        let mut stated = HashMap::with_capacity(self.routes.len());
        for (path, policy) in self.routes {
            if !path.starts_with('/') {
                return invalid(format!(
                    "`{}` is no route's path: name it as `Router::route` was given it, from its `/`",
                    quote(&path)
                ));
            }
            let rule = match policy {
                Some(policy) => limit(scope(&path), &base, Some(&policy)),
                None => Rule::Exempt,
            };
            if stated.insert(path.clone().into_boxed_str(), rule).is_some() {
                return invalid(format!("route `{}` is stated twice", quote(&path)));
            }
        }
        let unmatched = match self.limit_unmatched {
            // No route's scope is empty: every escaped path starts with `%2F`.
            true => limit(Arc::from(&b"|"[..]), &base, None),
            false => Rule::Exempt,
        };
        Ok(PerRoute { base, stated, unmatched })
    }
}

/// A per-route layer's limits, built.
pub(super) struct PerRoute {
    /// The layer's one limiter, deciding by the default policy.
    base: Source,
    /// The stated routes, by path.
    stated: HashMap<Box<str>, Rule>,
    unmatched: Rule,
}

#[derive(Clone)]
enum Rule {
    Exempt,
    /// Counted under `scope` on `source`, by `policy` when the request gives it.
    Limit {
        scope: Arc<[u8]>,
        source: Source,
        policy: Option<Policy>,
    },
}

/// A route's rule deciding by `policy` (the default when `None`) on
/// `base`: a given limiter is bound to it once, here; a lazy one, built
/// only at the first request, takes it with each request.
fn limit(scope: Arc<[u8]>, base: &Source, policy: Option<&Policy>) -> Rule {
    let (source, policy) = match (base, policy) {
        (Source::Limiter(limiter), Some(policy)) => (Source::Limiter(limiter.with_policy(policy)), None),
        (base, policy) => (base.clone(), policy.cloned()),
    };
    Rule::Limit { scope, source, policy }
}

/// What a route's keys start with: its path escaped (so it holds no `|`,
/// and no client's path or key can pose as another route's), then `|`.
fn scope(path: &str) -> Arc<[u8]> {
    let mut scope = String::with_capacity(path.len() + 8);
    push_key_value(&mut scope, &path);
    scope.push('|');
    Arc::from(scope.into_bytes())
}

impl PerRoute {
    pub(super) fn name(&self) -> &str {
        self.base.name()
    }

    /// What decides `request`, by the route axum matched (not its URI, so
    /// `/users/1` and `/users/2` count as `/users/{id}`); `None` when exempt.
    pub(super) fn choose(&self, request: &Request) -> Option<Chosen> {
        let rule = match request.extensions().get::<MatchedPath>() {
            Some(route) => match self.stated.get(route.as_str()) {
                Some(rule) => rule,
                None => {
                    let (source, scope) = (self.base.clone(), Some(scope(route.as_str())));
                    return Some(Chosen { source, policy: None, scope });
                }
            },
            None => &self.unmatched,
        };
        match rule {
            Rule::Exempt => None,
            Rule::Limit { scope, source, policy } => {
                Some(Chosen { source: source.clone(), policy: policy.clone(), scope: Some(scope.clone()) })
            }
        }
    }

    /// The same limits with another `on_error` where the limiter is built here.
    pub(super) fn with_on_error(&self, on_error: OnError) -> PerRoute {
        let base = self.base.with_on_error(on_error);
        let rebase = |rule: &Rule| match rule {
            Rule::Limit { scope, source: Source::Lazy(_), policy } => {
                Rule::Limit { scope: scope.clone(), source: base.clone(), policy: policy.clone() }
            }
            rule => rule.clone(),
        };
        let stated = self.stated.iter().map(|(path, rule)| (path.clone(), rebase(rule))).collect();
        let unmatched = rebase(&self.unmatched);
        PerRoute { base, stated, unmatched }
    }
}

impl RateLimitLayer {
    /// A layer over a whole router giving every route its own limit, by
    /// the default policy of `routes` unless it states another (see
    /// [`RouteLimits`]), under the limiter name `name` on the global store,
    /// resolved at the first request. An error names what is wrong with the
    /// routes.
    ///
    /// Add it with `Router::layer` (or `Router::route_layer`, which
    /// unmatched requests never reach). It counts each route apart by the
    /// route axum matched (its [`MatchedPath`], not the request's path, so
    /// `/users/1` and `/users/2` share the count of `/users/{id}`), and a
    /// client's key: one limiter, whose keys are the route's path, escaped,
    /// then `|` and the client's key. A route's `RateLimit-Policy` and
    /// `RateLimit` fields, and its 429, describe the policy that decided it.
    /// Axum sets the matched route when its router picks one, so the layer
    /// must be inside the router: wrapped around it, it sees no route, and
    /// counts every request as unmatched.
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
    /// assert_eq!((orders.status().as_u16(), orders.headers()["ratelimit"].to_str().unwrap()), (200, r#""2/1m";r=1;t=60"#));
    /// assert_eq!(app.call(get("/health")).await.unwrap().headers().get("ratelimit"), None);
    /// # Ok(()) }
    /// ```
    pub fn per_route(name: impl Into<Arc<str>>, routes: RouteLimits) -> Result<RateLimitLayer, Error> {
        let name: Arc<str> = name.into();
        let lazy = LazyLimiter::fixed(Cow::Owned(name.to_string()), routes.default.clone(), OnError::default());
        let per_route = routes.build(Source::Lazy(Arc::new(lazy)))?;
        Ok(RateLimitLayer::with_limits(Limits::PerRoute(Arc::new(per_route))))
    }

    /// [`per_route`](Self::per_route) on `limiter` (its name, store and
    /// [`OnError`]; its own policy is not used, the routes' are).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer, RouteLimits};
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("api", Policy::fixed_window("1000/1h")?, &store);
    /// let layer = RateLimitLayer::per_route_on(limiter, RouteLimits::new(Policy::fixed_window("1/1m")?))?
    ///     .key(KeyBy::header("x-api-key")?);
    /// let mut app = Router::new().route("/a", get(|| async { "a" })).route("/b", get(|| async { "b" })).layer(layer);
    /// let get = |path: &str| Request::builder().uri(path).header("x-api-key", "k").body(Body::empty()).unwrap();
    ///
    /// assert_eq!(app.call(get("/a")).await.unwrap().status(), 200);
    /// assert_eq!(app.call(get("/a")).await.unwrap().status(), 429);
    /// assert_eq!(app.call(get("/b")).await.unwrap().status(), 200); // `/a` spent only its own
    /// # Ok(()) }
    /// ```
    pub fn per_route_on(limiter: Limiter, routes: RouteLimits) -> Result<RateLimitLayer, Error> {
        let base = Source::Limiter(limiter.with_policy(&routes.default));
        let per_route = routes.build(base)?;
        Ok(RateLimitLayer::with_limits(Limits::PerRoute(Arc::new(per_route))))
    }
}
