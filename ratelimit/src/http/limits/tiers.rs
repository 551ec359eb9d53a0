//! [`Tiers`]: a policy chosen per request among named tiers (plans such as
//! free and pro), each counted by its own limiter.

use super::source::{Chosen, LimiterSource};
use crate::error::Error;
use crate::global::lazy::LazyLimiter;
use crate::limiter::enforcement::Enforcement;
use crate::limiter::Limiter;
use crate::policy::Policy;
use axum::extract::Request;
use axum::http::{HeaderName, StatusCode};
use redlimit_grammar::quote;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// The tiers of a [`RateLimitLayer::tiered`](crate::http::RateLimitLayer::tiered)
/// layer: how a request names its tier ([`TierBy`]) and each tier's policy.
///
/// Each tier is its own limiter, so its counts are its own: a client moving
/// from `free` to `pro` starts afresh under `pro`. A tier given a [`Policy`]
/// or a configured policy's name is limited under `<layer name>.<tier>`
/// (`api.free`) on the global store; [`tier_limiter`](Self::tier_limiter)
/// takes your own limiter.
///
/// A request naming no tier, or one that is not listed, is counted under the
/// [`fallback`](Self::fallback) tier when there is one, and otherwise
/// answered `400 Bad Request` (problem+json) without calling the route, so
/// a client cannot escape the limit by naming no plan or a made-up one.
///
/// ```
/// use redlimit::http::{RateLimitLayer, TierBy, Tiers};
/// use redlimit::Policy;
///
/// let tiers = Tiers::new(TierBy::header("x-plan")?)
///     .tier("free", Policy::fixed_window("10/1m")?)
///     .tier("pro", Policy::fixed_window("1000/1m")?)
///     .fallback("free");
/// let layer = RateLimitLayer::tiered("api", tiers)?;
///
/// let unknown = Tiers::new(TierBy::header("x-plan")?).tier("free", Policy::fixed_window("10/1m")?).fallback("gold");
/// let error = RateLimitLayer::tiered("api", unknown).err().unwrap().to_string();
/// assert!(error.contains("`gold`") && error.contains("free"), "{error}");
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Clone)]
pub struct Tiers {
    by: TierBy,
    tiers: Vec<(String, TierPolicy)>,
    fallback: Option<String>,
}

#[derive(Clone)]
enum TierPolicy {
    Fixed(Policy),
    Named(String),
    Limiter(Limiter),
}

/// How a request names its tier (see [`Tiers`]).
///
/// ```
/// use redlimit::http::TierBy;
///
/// // Set by an authenticating gateway, never by the client itself.
/// let by_header = TierBy::header("x-plan")?;
/// // Or anything the request carries, such as an extension your authentication put there.
/// let by_path = TierBy::function(|request| request.uri().path().starts_with("/internal/").then(|| "internal".to_string()));
/// assert!(TierBy::header("not a header").is_err());
/// # let _ = (by_header, by_path);
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Clone)]
pub struct TierBy(By);

#[derive(Clone)]
enum By {
    Header(HeaderName),
    Function(TierFn),
}

type TierFn = Arc<dyn Fn(&Request) -> Option<String> + Send + Sync>;

impl TierBy {
    /// The value of header `name` (a value that is not visible ASCII names
    /// no tier). A name that is not a valid header name is an error naming it.
    ///
    /// Believe a header only when something you run sets it (an
    /// authenticating proxy, a middleware before this layer), since a client
    /// can send any plan it likes.
    pub fn header(name: &str) -> Result<TierBy, Error> {
        HeaderName::try_from(name)
            .map(|name| TierBy(By::Header(name)))
            .map_err(|_| Error::InvalidConfig(format!("`{}` is not a valid HTTP header name", quote(name))))
    }

    /// Whatever `f` returns, for example from a request extension your
    /// authentication put there; `None` names no tier.
    pub fn function(f: impl Fn(&Request) -> Option<String> + Send + Sync + 'static) -> TierBy {
        TierBy(By::Function(Arc::new(f)))
    }

    fn tier<'r>(&self, request: &'r Request) -> Option<Cow<'r, str>> {
        match &self.0 {
            By::Header(name) => request.headers().get(name)?.to_str().ok().map(Cow::Borrowed),
            By::Function(f) => f(request).map(Cow::Owned),
        }
    }

    fn describe(&self) -> String {
        match &self.0 {
            By::Header(name) => format!("header `{name}`"),
            By::Function(_) => "tier function".into(),
        }
    }
}

impl fmt::Debug for TierBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            By::Header(name) => f.debug_tuple("Header").field(name).finish(),
            By::Function(_) => f.write_str("Function"),
        }
    }
}

impl fmt::Debug for Tiers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.tiers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Tiers").field("by", &self.by).field("tiers", &names).field("fallback", &self.fallback).finish()
    }
}

impl Tiers {
    /// No tiers yet; `by` names a request's tier.
    pub fn new(by: TierBy) -> Tiers {
        Tiers { by, tiers: Vec::new(), fallback: None }
    }

    /// Tier `name` applies `policy`, on the global store.
    pub fn tier(self, name: impl Into<String>, policy: Policy) -> Tiers {
        self.with(name.into(), TierPolicy::Fixed(policy))
    }

    /// Tier `name` applies the configured policy named `policy` (see
    /// [`crate::policies`]), following reloads, on the global store.
    pub fn tier_named(self, name: impl Into<String>, policy: impl Into<String>) -> Tiers {
        self.with(name.into(), TierPolicy::Named(policy.into()))
    }

    /// Tier `name` decides on `limiter` (its store, its [`OnError`](crate::OnError)). Give
    /// each tier's limiter its own name: the name keeps the counts apart.
    pub fn tier_limiter(self, name: impl Into<String>, limiter: Limiter) -> Tiers {
        self.with(name.into(), TierPolicy::Limiter(limiter))
    }

    /// Counts a request naming no listed tier under tier `name` (default:
    /// such a request is answered `400`).
    pub fn fallback(mut self, name: impl Into<String>) -> Tiers {
        self.fallback = Some(name.into());
        self
    }

    fn with(mut self, name: String, policy: TierPolicy) -> Tiers {
        self.tiers.push((name, policy));
        self
    }

    /// The tiers' limiters for the layer named `layer`; an error names what
    /// is wrong (no tier, a tier twice, an unknown fallback, two tiers on
    /// one limiter name).
    pub(crate) fn build(self, layer: &str) -> Result<Tiered, Error> {
        let invalid = |why: String| Err(Error::InvalidConfig(format!("the tiers of `{}`: {why}", quote(layer))));
        if self.tiers.is_empty() {
            return invalid("there is none; add one with `Tiers::tier`".into());
        }
        let listed = self.tiers.iter().map(|(name, _)| format!("`{}`", quote(name))).collect::<Vec<_>>().join(", ");
        let mut tiers: Vec<(Arc<str>, LimiterSource)> = Vec::with_capacity(self.tiers.len());
        for (tier, policy) in self.tiers {
            if tiers.iter().any(|(seen, _)| **seen == *tier) {
                return invalid(format!("tier `{}` is listed twice", quote(&tier)));
            }
            let limiter_name = Cow::Owned(format!("{layer}.{tier}"));
            let source = match policy {
                TierPolicy::Fixed(policy) => {
                    LimiterSource::Lazy(Arc::new(LazyLimiter::fixed(limiter_name, policy, Enforcement::DEFAULT)))
                }
                TierPolicy::Named(policy) => LimiterSource::Lazy(Arc::new(LazyLimiter::named(
                    limiter_name,
                    Cow::Owned(policy),
                    Enforcement::DEFAULT,
                ))),
                TierPolicy::Limiter(limiter) => LimiterSource::Limiter(limiter),
            };
            if let Some((other, _)) = tiers.iter().find(|(_, seen)| seen.name() == source.name()) {
                return invalid(format!(
                    "tiers `{}` and `{}` both count under the limiter name `{}`; give each its own",
                    quote(&**other),
                    quote(&tier),
                    quote(source.name())
                ));
            }
            tiers.push((tier.into(), source));
        }
        let fallback = match self.fallback {
            None => None,
            Some(fallback) => match tiers.iter().position(|(tier, _)| **tier == *fallback) {
                Some(index) => Some(index),
                None => return invalid(format!("the fallback `{}` is not one of {listed}", quote(&fallback))),
            },
        };
        Ok(Tiered { name: layer.into(), by: self.by, tiers, fallback, listed })
    }
}

/// A tiered layer's limiters, built.
pub(crate) struct Tiered {
    name: Arc<str>,
    by: TierBy,
    tiers: Vec<(Arc<str>, LimiterSource)>,
    fallback: Option<usize>,
    /// The tiers' names, for messages.
    listed: String,
}

impl Tiered {
    /// The name the layer was given.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The tier deciding `request`; `Err` with the status and detail to
    /// answer instead (a `400` when it names no tier and there is no fallback).
    pub(super) fn choose(&self, request: &Request) -> Result<Chosen, (StatusCode, String)> {
        let tier = self.by.tier(request);
        let index = tier.and_then(|tier| self.tiers.iter().position(|(name, _)| **name == *tier));
        match index.or(self.fallback) {
            Some(index) => Ok(Chosen::by(self.tiers[index].1.clone(), None)),
            None => Err((
                StatusCode::BAD_REQUEST,
                format!(
                    "this route is rate limited by `{}` per tier ({}), and the request's {} names none of them",
                    self.name,
                    self.listed,
                    self.by.describe()
                ),
            )),
        }
    }
}
