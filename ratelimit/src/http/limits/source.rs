//! [`LimiterSource`]: where one limiter of a [`RateLimitLayer`](crate::http::RateLimitLayer)
//! comes from (given, or built at the first request, on the global store or a given one),
//! and [`Chosen`]: what decides one request.

use crate::global::lazy::LazyLimiter;
use crate::limiter::on_error::OnError;
use crate::limiter::Limiter;
use crate::policy::Policy;
use crate::store::Store;
use std::sync::{Arc, OnceLock};

/// Where a layer's (or a tier's) limiter comes from.
#[derive(Clone)]
pub(crate) enum LimiterSource {
    /// Given, with its own store and `OnError`.
    Limiter(Limiter),
    /// Built on the global store at the first request.
    Lazy(Arc<LazyLimiter>),
    /// Built on a given store at the first request, whose policy it takes:
    /// every request brings its own or takes the default, so no other is needed.
    OnStore(Arc<OnStore>),
}

/// A name and a store, and the limiter built on them at the first request.
pub(crate) struct OnStore {
    name: Arc<str>,
    store: Store,
    /// The policy of a request that gives none (`None`: each must give one).
    default: Option<Policy>,
    built: OnceLock<Limiter>,
}

impl OnStore {
    pub(crate) fn new(name: Arc<str>, store: &Store) -> OnStore {
        OnStore { name, store: store.clone(), default: None, built: OnceLock::new() }
    }

    /// Deciding by `policy` a request that gives none.
    pub(super) fn with_default(self, policy: Policy) -> OnStore {
        OnStore { default: Some(policy), ..self }
    }
}

impl LimiterSource {
    pub(super) fn name(&self) -> &str {
        match self {
            LimiterSource::Limiter(limiter) => limiter.name(),
            LimiterSource::Lazy(lazy) => lazy.name(),
            LimiterSource::OnStore(on_store) => &on_store.name,
        }
    }

    /// The limiter deciding now, by `per_request` when the request gave a
    /// policy; `Err` when a named policy is not configured. One built here
    /// settles a store failure by `on_error`; a given limiter keeps its own.
    pub(crate) async fn limiter(&self, per_request: Option<&Policy>, on_error: OnError) -> Result<Limiter, Arc<str>> {
        match (self, per_request) {
            (LimiterSource::Limiter(limiter), None) => Ok(limiter.clone()),
            (LimiterSource::Limiter(limiter), Some(policy)) => Ok(limiter.with_policy(policy)),
            (LimiterSource::Lazy(lazy), _) => {
                lazy.current_ref(per_request).await.map(|(limiter, _)| limiter.into_owned().with_on_error(on_error))
            }
            (LimiterSource::OnStore(on_store), per_request) => {
                let OnStore { name, store, default, built } = &**on_store;
                let Some(policy) = per_request.or(default.as_ref()) else {
                    return Err("no policy was given for this request".into());
                };
                let limiter = built.get_or_init(|| Limiter::new(name.clone(), policy.clone(), store));
                Ok(limiter.with_policy(policy).with_on_error(on_error))
            }
        }
    }
}

/// What decides one request: a limiter, the policy it decides by when the
/// request gives one, and what comes before the request's key in its
/// counts (a route's, so routes count apart).
pub(crate) struct Chosen {
    pub(super) source: LimiterSource,
    pub(super) policy: Option<Policy>,
    pub(super) scope: Option<Arc<[u8]>>,
}

impl Chosen {
    pub(super) fn by(source: LimiterSource, policy: Option<Policy>) -> Chosen {
        Chosen { source, policy, scope: None }
    }

    /// The limiter, its policy and the full key of a request keyed `key`.
    pub(crate) fn keyed(self, key: Vec<u8>) -> (LimiterSource, Option<Policy>, Vec<u8>) {
        let key = match self.scope {
            Some(scope) => [&scope[..], &key].concat(),
            None => key,
        };
        (self.source, self.policy, key)
    }
}
