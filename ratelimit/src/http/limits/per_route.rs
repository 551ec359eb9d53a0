//! [`PerRoute`]: the limits of a [`RateLimitLayer::per_route`](crate::http::RateLimitLayer::per_route)
//! layer, built: one limiter, and the rule of each route it was told of.

use super::source::{Chosen, LimiterSource};
use crate::error::Error;
use crate::key::push_key_value;
use crate::policy::Policy;
use axum::extract::{MatchedPath, Request};
use redlimit_grammar::quote;
use std::collections::HashMap;
use std::sync::Arc;

/// A per-route layer's limits, built.
pub(crate) struct PerRoute {
    /// The layer's one limiter, deciding by the default policy.
    base: LimiterSource,
    /// The stated routes, by path.
    stated: HashMap<Box<str>, RouteRule>,
    unmatched: RouteRule,
}

#[derive(Clone)]
enum RouteRule {
    Exempt,
    /// Counted under `scope` on `source`, by `policy` when the request gives it.
    Limit {
        scope: Arc<[u8]>,
        source: LimiterSource,
        policy: Option<Policy>,
    },
}

/// A route's rule deciding by `policy` (the default when `None`) on
/// `base`, which is built only at the first request and so takes the
/// policy with each request.
fn limit(scope: Arc<[u8]>, base: &LimiterSource, policy: Option<&Policy>) -> RouteRule {
    RouteRule::Limit { scope, source: base.clone(), policy: policy.cloned() }
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
    /// The rules of `routes` (each stated route and its policy, `None`
    /// for exempt), each deciding on `base` (the layer's limiter, deciding
    /// by the default policy); an error names a route that is stated twice
    /// or is no route's path.
    pub(super) fn new(
        base: LimiterSource,
        routes: Vec<(String, Option<Policy>)>,
        limit_unmatched: bool,
    ) -> Result<PerRoute, Error> {
        let invalid = |why: String| Err(Error::InvalidConfig(format!("the routes of `{}`: {why}", quote(base.name()))));
        let mut stated = HashMap::with_capacity(routes.len());
        for (path, policy) in routes {
            if !path.starts_with('/') {
                return invalid(format!(
                    "`{}` is no route's path: name it as `Router::route` was given it, from its `/`",
                    quote(&path)
                ));
            }
            let rule = match policy {
                Some(policy) => limit(scope(&path), &base, Some(&policy)),
                None => RouteRule::Exempt,
            };
            if stated.insert(path.clone().into_boxed_str(), rule).is_some() {
                return invalid(format!("route `{}` is stated twice", quote(&path)));
            }
        }
        let unmatched = match limit_unmatched {
            // No route's scope is empty: every escaped path starts with `%2F`.
            true => limit(Arc::from(&b"|"[..]), &base, None),
            false => RouteRule::Exempt,
        };
        Ok(PerRoute { base, stated, unmatched })
    }

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
            RouteRule::Exempt => None,
            RouteRule::Limit { scope, source, policy } => {
                Some(Chosen { source: source.clone(), policy: policy.clone(), scope: Some(scope.clone()) })
            }
        }
    }
}
