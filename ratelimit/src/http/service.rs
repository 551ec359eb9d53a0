//! [`RateLimitService`]: what a [`RateLimitLayer`](super::RateLimitLayer)
//! does with each request: find its key, ask the limiter, answer or call the
//! route and add the header fields.

use super::actual_cost::ActualCost;
use super::cost::RequestCost;
use super::fields::headers::{insert_rate_limit_headers_per_request, merge_rate_limit_fields, Counted, HeaderStyle};
use super::fields::quota::QuotaUnit;
use super::held_body::holding;
use super::key::{KeyBy, MissingKey};
use super::limits::source::LimiterSource;
use super::limits::Limits;
use super::response::{problem, respond, DeniedByLimit};
use crate::call::Call;
use crate::decision::Decision;
use crate::limiter::enforcement::OnLimit;
use crate::limiter::on_error::OnError;
use crate::limiter::Limiter;
use crate::permit::Permit;
use crate::policy::{Policy, Priority};
use crate::rate_limited::RateLimited;
use axum::extract::Request;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Everything a layer's services share.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) limits: Limits,
    pub(super) key: KeyBy,
    pub(super) cost: RequestCost,
    /// What a permit is, when the fields count permits.
    pub(super) unit: QuotaUnit,
    pub(super) missing_key: MissingKey,
    pub(super) headers_on_allowed: bool,
    pub(super) style: HeaderStyle,
    /// Whether the missing `ConnectInfo` was already logged.
    pub(super) told_missing_peer: Arc<AtomicBool>,
    /// A request any of these match passes uncounted.
    pub(super) exempt: Vec<Exempt>,
    pub(super) on_rejected: Option<OnRejected>,
    /// What a limiter built here (not one given) does when the store fails.
    pub(super) on_error: OnError,
    /// Requests are decided and recorded, never denied.
    pub(super) dry_run: bool,
    /// A limiter in dry run states its fields on the requests it lets through.
    pub(super) dry_run_fields: bool,
    /// A response with a status this returns true for gives its request's permits back.
    pub(super) refund_on: Option<RefundOn>,
    /// The class each request is decided as (`None`: every request normal).
    pub(super) priority: Option<super::priority::RequestPriority>,
}

/// A predicate exempting a request from the limit.
pub(super) type Exempt = Arc<dyn Fn(&Request) -> bool + Send + Sync>;

/// Which response statuses give their request's permits back.
pub(super) type RefundOn = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;

/// The user's rejection response, from the denial, the request and the default response.
pub(super) type OnRejected = Arc<dyn Fn(&RateLimited, &Request, Response) -> Response + Send + Sync>;

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
    /// Call the route, holding what the limiter granted when it decided.
    Pass(Option<Admitted>),
    /// Answer this instead of calling the route.
    Respond(Response),
    /// Denied: answer this response, or what `on_rejected` makes of it.
    Denied(Box<RateLimited>, Response),
}

/// A request the limiter let through: the permit it holds while the route
/// handles it (a concurrency policy's; a rate's holds nothing), and the
/// limiter whose policy its header fields state.
struct Admitted {
    /// What the request holds, and gives back on a refund.
    permit: Permit,
    limiter: Limiter,
    /// Whether the decision says something true about the limit, and so
    /// is stated in header fields.
    stated: bool,
    /// The key's state after a refund, which the fields state instead.
    /// Boxed: refunds are rare, and every admitted request carries this.
    refunded: Option<Box<Decision>>,
}

impl Admitted {
    /// The header fields stating the decision, unless it says nothing true
    /// about the limit or the layer sends none on allowed responses.
    fn fields(&self, shared: &Shared) -> Option<HeaderMap> {
        if !self.stated || !shared.headers_on_allowed {
            return None;
        }
        // A trial enforces nothing: a client pacing by its fields would slow
        // down for a limit that is not in force.
        if self.limiter.is_dry_run() && !shared.dry_run_fields {
            return None;
        }
        let (policy, style) = (self.limiter.policy(), shared.style);
        let decision = self.refunded.as_deref().unwrap_or(self.permit.decision());
        let mut fields = HeaderMap::new();
        insert_rate_limit_headers_per_request(&mut fields, policy, decision, style, shared.counted());
        // The request was let through: a trial's would-be denial names a wait nobody must keep.
        fields.remove(RETRY_AFTER);
        Some(fields)
    }

    /// Gives the request's permits back, before its response leaves, when
    /// the route never ran (a limit inside this one denied it); else settles
    /// them at what the handler said the request cost ([`ActualCost`]);
    /// else gives them back when `refund_on` says its response's status did
    /// not use them. (Given what it reads of the response: a body is not
    /// `Sync`, so `&Response` cannot live across the refund's await.)
    async fn refund_if(
        mut self,
        status: StatusCode,
        (denied_inside, actual): (bool, Option<ActualCost>),
        shared: &Shared,
    ) -> Admitted {
        // The permit keeps what the store took (not what `on_error` or a
        // dry run let through): that alone comes back or is settled.
        if denied_inside {
            self.refunded = self.permit.ticket.refunded().await.map(Box::new);
        } else if let Some(ActualCost(actual)) = actual {
            self.refunded = self.permit.ticket.settled(actual).await.map(Box::new);
        } else if shared.refund_on.as_ref().is_some_and(|refund_on| refund_on(status)) {
            self.refunded = self.permit.ticket.refunded().await.map(Box::new);
        }
        self
    }

    /// The route's response, with the fields stating the decision (added to
    /// a handler's own, its denial's say, never in their place), and its
    /// body holding the permit, if there is one, until the body is sent.
    fn answer(self, mut response: Response, shared: &Shared) -> Response {
        if let Some(fields) = self.fields(shared) {
            merge_rate_limit_fields(response.headers_mut(), &fields);
        }
        if !self.permit.is_held() {
            return response;
        }
        response.map(|body| holding(body, self.permit))
    }
}

impl Shared {
    fn name(&self) -> &str {
        self.limits.name()
    }

    /// What the fields count: whole requests of a fixed cost in requests,
    /// else permits (requests no longer cost the same, or a permit is
    /// another unit).
    fn counted(&self) -> Counted {
        match (&self.cost, self.unit) {
            (RequestCost::Fixed(cost), QuotaUnit::Requests) => Counted::Requests(*cost),
            (_, unit) => Counted::Permits(unit),
        }
    }

    fn is_exempt(&self, request: &Request) -> bool {
        self.exempt.iter().any(|exempt| exempt(request))
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

    /// Decides one request of `cost` permits on `source`'s limiter, by
    /// `policy` when the request gave one.
    async fn decide(
        &self,
        source: LimiterSource,
        policy: Option<Policy>,
        key: Vec<u8>,
        (cost, class): (u64, Option<Priority>),
    ) -> Verdict {
        let mut limiter = match source.limiter(policy.as_ref(), self.on_error).await {
            Ok(limiter) if self.dry_run => limiter.with_dry_run(true),
            Ok(limiter) => limiter,
            Err(why) => return self.without_policy(&source, &why, &key),
        };
        if let Some(class) = class {
            limiter = limiter.with_priority(class);
        }
        // The permit keeps what the store took, for `refund_on`, `ActualCost`
        // or a limit inside this one that denies the request to give back.
        limiter.enforcement.refunds = true;
        match limiter.admit(Call::check(&key, cost), OnLimit::Error).await {
            Ok(permit) => {
                // A decision with nothing to reset and taken from no store (the
                // store failed and `on_error = allow` let the call through)
                // says nothing true about the limit, so no header fields; a
                // store's answer to a cost of 0 on an untouched key does.
                let stated = permit.taken || !permit.decision().reset_after.is_zero();
                Verdict::Pass(Some(Admitted { permit, limiter, stated, refunded: None }))
            }
            Err(denied) => {
                let response = respond(&denied, Some(limiter.policy()), self.style, self.counted(), cost);
                Verdict::Denied(Box::new(denied), response)
            }
        }
    }

    /// A request whose named policy is not configured: settled by `on_error`
    /// as a store failure would be (503 under `Deny`, else through uncounted).
    fn without_policy(&self, source: &LimiterSource, why: &str, key: &[u8]) -> Verdict {
        let LimiterSource::Lazy(lazy) = source else { return Verdict::Pass(None) };
        match lazy.settle_unconfigured(self.on_error, "request", why, key) {
            Ok(()) => Verdict::Pass(None),
            Err(denied) => {
                let detail = format!(
                    "the named policy of rate limiter `{}` is not configured, so the request could not be decided",
                    lazy.name()
                );
                Verdict::Denied(Box::new(denied), problem(StatusCode::SERVICE_UNAVAILABLE, &detail, None))
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
        if shared.is_exempt(&request) {
            return Box::pin(async move { Ok(inner.call(request).await?.into_response()) });
        }
        // An exempt route passes before its key is looked for, as `exempt` does.
        // The cost is computed only for a request that will be counted, once
        // it is known to have a key, and travels with it: never the layer's.
        let key = shared.limits.choose(&request).and_then(|chosen| match chosen {
            Some(chosen) => match shared.key_of(&request)? {
                Some(key) => {
                    let cost = shared.cost.of(&request, shared.name())?;
                    let class = shared.priority.as_ref().map(|p| p.of(&request, shared.name())).transpose()?;
                    Ok(Some((chosen.keyed(key), (cost, class))))
                }
                None => Ok(None),
            },
            None => Ok(None),
        });
        Box::pin(async move {
            let verdict = match key {
                Ok(Some(((source, policy, key), cost))) => shared.decide(source, policy, key, cost).await,
                Ok(None) => Verdict::Pass(None),
                Err((status, detail)) => Verdict::Respond(problem(status, &detail, None)),
            };
            match verdict {
                Verdict::Respond(response) => Ok(response),
                Verdict::Denied(denied, response) => {
                    let mut response = match &shared.on_rejected {
                        Some(on_rejected) => on_rejected(&denied, &request, response),
                        None => response,
                    };
                    // However it is shaped, a layer outside this one gives back what the request took.
                    response.extensions_mut().insert(DeniedByLimit);
                    Ok(response)
                }
                Verdict::Pass(None) => Ok(inner.call(request).await?.into_response()),
                // The permit is held while the route's future runs and its
                // body is sent, and given back when the body ends, or when
                // either fails or is dropped unfinished.
                Verdict::Pass(Some(admitted)) => {
                    // An error returns at once (it need not be `Send`, so no
                    // await may follow it): dropped, the permit goes back.
                    let response = inner.call(request).await?.into_response();
                    let denied_inside = response.extensions().get::<DeniedByLimit>().is_some();
                    let actual = response.extensions().get::<ActualCost>().copied();
                    let admitted = admitted.refund_if(response.status(), (denied_inside, actual), &shared).await;
                    Ok(admitted.answer(response, &shared))
                }
            }
        })
    }
}
