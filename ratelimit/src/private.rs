//! Everything `#[rate_limit]` output calls. Not a public API: names and
//! signatures here change with the macro, which is pinned to this crate.
//!
//! Generated code names nothing else: every path it writes is
//! `::ratelimit::__private::...` (or the `crate = "..."` override), so a user's
//! `mod core {}`, `type Result` or `struct String` cannot change its meaning.

pub use crate::key::{push_key_integer, push_key_value, KeyBuffer, KeyInteger};
pub use crate::policy::Policy;
pub use crate::{OnError, RateLimited};
pub use ratelimit_grammar::{Rate, Strategy};
pub use std::string::String;

use crate::config::named::{Configured, NamedLimiter};
use crate::limiter::Clocked;
use crate::{runtime, Limiter};
use futures_util::future::Either;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;
use tokio::sync::OnceCell;

/// What a denied call does.
#[derive(Debug, Clone, Copy)]
pub enum OnLimit {
    /// Return `Err(RateLimited.into())` (or call the fallback: decided by the generated code).
    Error,
    /// Sleep until `retry_after` and try again, for at most this long in total (`None`: unbounded).
    Wait(Option<Duration>),
}

/// One annotated function's limiter: built on first call on the global store.
#[derive(Debug)]
pub struct Site {
    name: &'static str,
    policy: SitePolicy,
    on_limit: OnLimit,
    on_error: OnError,
    named_by_default: bool,
    limiter: OnceCell<Limiter>,
    /// Settles calls while the global store cannot be built (keeps the
    /// in-memory state of `on_error = "local"` between calls).
    degraded: OnceLock<Limiter>,
}

#[derive(Debug)]
enum SitePolicy {
    /// Written in the attribute, validated at compile time.
    Fixed(Policy),
    /// Named: looked up in [`crate::policies`] at run time, followed across reloads.
    Named(NamedLimiter),
}

impl Site {
    /// A site; `policy` comes from a constant the macro validated at compile time.
    pub const fn new(name: &'static str, policy: Policy, on_limit: OnLimit, on_error: OnError) -> Site {
        Site::with(name, SitePolicy::Fixed(policy), on_limit, on_error)
    }

    /// A site whose policy is the one named `policy` in the configured set
    /// (`#[rate_limit(policy = "search")]`), followed across reloads.
    pub const fn configured(name: &'static str, policy: &'static str, on_limit: OnLimit, on_error: OnError) -> Site {
        Site::with(
            name,
            SitePolicy::Named(NamedLimiter::new(Cow::Borrowed(name), Cow::Borrowed(policy), on_error)),
            on_limit,
            on_error,
        )
    }

    const fn with(name: &'static str, policy: SitePolicy, on_limit: OnLimit, on_error: OnError) -> Site {
        Site {
            name,
            policy,
            on_limit,
            on_error,
            named_by_default: false,
            limiter: OnceCell::const_new(),
            degraded: OnceLock::new(),
        }
    }

    /// Marks `name` as made up by the macro (module path + function name).
    /// Methods of two types in one module get the same such name and so
    /// share a limit; the first call of the second one warns about it.
    pub const fn named_by_default(mut self) -> Site {
        self.named_by_default = true;
        self
    }

    async fn limiter(&'static self, policy: &'static Policy) -> Result<&'static Limiter, crate::Error> {
        if let Some(limiter) = self.limiter.get() {
            return Ok(limiter);
        }
        // Building the store (connecting to Redis, loading scripts) is a deep
        // and large future; boxed behind `dyn`, it stays out of the future of
        // every annotated function, which would otherwise carry all of it
        // (and overflow rustc's layout depth limit).
        let init: Pin<Box<dyn Future<Output = Result<&'static Limiter, crate::Error>> + Send>> =
            Box::pin(self.limiter.get_or_try_init(|| async {
                let store = runtime::global().await?;
                if self.named_by_default {
                    warn_if_default_name_shared(self);
                }
                Ok(Limiter::new(self.name, policy.clone(), store).with_on_error(self.on_error))
            }));
        init.await
    }

    /// Decides one call at once when it can be: `Ok(Ok(()))` to run the
    /// body, `Ok(Err(..))` to return the denial (or call the fallback).
    /// That is a site whose denials are returned and whose limiter is built
    /// (for a named policy: for the policy set in use), deciding on the
    /// memory store or by a denial its deny cache remembers; and a named
    /// policy that is not configured, settled by `on_error`. Otherwise
    /// `Err`, and the call goes on through
    /// [`check_pending`](Self::check_pending). Generated code:
    ///
    /// ```text
    /// let decided = match SITE.check_at_once(&key, cost) {
    ///     Ok(decided) => decided,
    ///     Err(pending) => SITE.check_pending(&key, cost, pending).await,
    /// };
    /// ```
    ///
    /// A call decided at once builds no future: on the memory store,
    /// building and moving one cost more than the decision itself.
    ///
    /// The denial is boxed: every call moves this `Result` out of its
    /// futures, and a boxed one is two words.
    #[inline]
    pub fn check_at_once(&'static self, key: &str, cost: u64) -> Result<Result<(), Box<RateLimited>>, Pending> {
        match (&self.policy, self.on_limit, self.limiter.get()) {
            (SitePolicy::Fixed(_), OnLimit::Error, Some(limiter)) => {
                limiter.pass_at_once(key.as_bytes(), cost).map_err(|clocked| Pending(Rest::Limiter(limiter, clocked)))
            }
            (SitePolicy::Named(named), OnLimit::Error, _) => self.named_at_once(named, key, cost),
            _ => Err(Pending(Rest::Otherwise)),
        }
    }

    /// [`check_at_once`](Self::check_at_once) for a site whose named policy
    /// already has its limiter for the policy set in use.
    fn named_at_once(
        &'static self,
        named: &NamedLimiter,
        key: &str,
        cost: u64,
    ) -> Result<Result<(), Box<RateLimited>>, Pending> {
        let Some(configured) = named.cached() else { return Err(Pending(Rest::Otherwise)) };
        let at_once = match &configured.limiter {
            Ok(limiter) => limiter.pass_at_once(key.as_bytes(), cost),
            Err(why) => return Ok(self.without_policy(named.policy(), why, key)),
        };
        at_once.map_err(|clocked| Pending(Rest::Named(configured, clocked)))
    }

    /// The call [`check_at_once`](Self::check_at_once) did not decide.
    /// Under `OnLimit::Wait` this sleeps until the call passes or the
    /// maximum wait would be exceeded.
    ///
    /// When the global store cannot even be built, or a named policy is not
    /// configured, the site's `on_error` decides, as for any other store
    /// failure (never a panic).
    ///
    /// The common call (a site whose limiter is built and whose denials are
    /// returned, asking Redis) gets the limiter's own future: no future of
    /// this function wraps it, to be built and polled on every call.
    pub fn check_pending<'k>(
        &'static self,
        key: &'k str,
        cost: u64,
        pending: Pending,
    ) -> impl Future<Output = Result<(), Box<RateLimited>>> + Send + 'k {
        match pending.0 {
            Rest::Limiter(limiter, clocked) => Either::Left(limiter.pass_clocked(key.as_bytes(), cost, clocked)),
            // Boxed, as the others: a named policy's limiter is shared with
            // reloads, so its call owns the `Arc`. Such a call that asks
            // Redis pays the allocation (one decided at once does not).
            Rest::Named(configured, clocked) => Either::Right(Box::pin(async move {
                match &configured.limiter {
                    Ok(limiter) => limiter.pass_clocked(key.as_bytes(), cost, clocked).await,
                    // Not made by `named_at_once`, which settles these itself.
                    Err(_) => self.check_otherwise(key, cost).await,
                }
            }) as Boxed<'k>),
            // Boxed: unboxed, its 280 bytes sized the future of every call
            // (the common one's is 136), and every await copied them.
            Rest::Otherwise => Either::Right(Box::pin(self.check_otherwise(key, cost)) as Boxed<'k>),
        }
    }

    /// Every other call: a site's first, one that waits out denials, or,
    /// for a named policy, the first after a reload or while the store is
    /// down.
    async fn check_otherwise(&'static self, key: &str, cost: u64) -> Result<(), Box<RateLimited>> {
        match &self.policy {
            SitePolicy::Fixed(policy) => {
                let limiter = match self.limiter(policy).await {
                    Ok(limiter) => limiter,
                    Err(error) => self.degraded.get_or_init(|| {
                        let store = crate::Store::from_backend(Arc::new(Unavailable(error)));
                        Limiter::new(self.name, policy.clone(), &store).with_on_error(self.on_error)
                    }),
                };
                self.decide(limiter, key, cost).await
            }
            SitePolicy::Named(named) => {
                let (configured, first) = named.current().await;
                if first && self.named_by_default {
                    warn_if_default_name_shared(self);
                }
                match &configured.limiter {
                    Ok(limiter) => self.decide(limiter, key, cost).await,
                    Err(why) => self.without_policy(named.policy(), why, key),
                }
            }
        }
    }

    async fn decide(&self, limiter: &Limiter, key: &str, cost: u64) -> Result<(), Box<RateLimited>> {
        match self.on_limit {
            OnLimit::Error => limiter.pass(key.as_bytes(), cost).await,
            // Boxed: a waiting call sleeps anyway, and its sleep would
            // otherwise size the future every call of `check` moves.
            OnLimit::Wait(max) => Box::pin(limiter.wait(key, cost, max)).await.map(drop).map_err(Box::new),
        }
    }

    /// A call naming a policy that is not configured: like a store that
    /// cannot answer, `on_error` settles it, with a warning each time.
    /// `"local"` has no policy to apply in memory, so it lets the call
    /// through as `"allow"` does.
    fn without_policy(&self, policy: &str, why: &str, key: &str) -> Result<(), Box<RateLimited>> {
        if matches!(self.on_error, OnError::Deny) {
            tracing::warn!(target: "ratelimit", limiter = %self.name, policy, "{why}; call denied (on_error = deny)");
            let decision = crate::Decision {
                allowed: false,
                limit: 0,
                remaining: 0,
                reset_after: Duration::ZERO,
                retry_after: None,
                violated: Vec::new(),
                decided_at: std::time::SystemTime::now(),
                quotas: Vec::new(),
            };
            return Err(Box::new(RateLimited {
                limiter: self.name.into(),
                key: key.to_string(),
                policy: None,
                decision,
                store_unavailable: true,
            }));
        }
        let on_error = if matches!(self.on_error, OnError::Local) { "local" } else { "allow" };
        tracing::warn!(target: "ratelimit", limiter = %self.name, policy, "{why}; call allowed (on_error = {on_error})");
        Ok(())
    }

    /// [`check_pending`](Self::check_pending) for a function that has no way to return a
    /// denial: `on_limit = "wait"` with no maximum, a literal cost the policy
    /// admits and `on_error` other than `"deny"`. The macro only emits it when
    /// those hold, so every denial is waited out; should one still come back,
    /// the call goes ahead (fail open, as `on_error = "allow"` does) with a warning.
    pub async fn admit(&'static self, key: &str, cost: u64) {
        // Boxed, as in `check_pending`: this site's calls all take this path.
        if let Err(denied) = Box::pin(self.check_otherwise(key, cost)).await {
            tracing::warn!(target: "ratelimit", limiter = %self.name, %denied, "denial could not be waited out; call allowed");
        }
    }
}

/// A call's future in [`Site::check_pending`] other than the common one's.
type Boxed<'k> = Pin<Box<dyn Future<Output = Result<(), Box<RateLimited>>> + Send + 'k>>;

/// What [`Site::check_at_once`] leaves for [`Site::check_pending`] when it
/// did not decide the call.
#[derive(Debug)]
pub struct Pending(Rest);

#[derive(Debug)]
enum Rest {
    /// The site's limiter goes on with the times it read for the call.
    Limiter(&'static Limiter, Clocked),
    /// So does the limiter of the site's named policy.
    Named(Arc<Configured>, Clocked),
    /// Any other call: see [`Site::check_otherwise`].
    Otherwise,
}

/// Warns once per site when another site already uses the same default name.
fn warn_if_default_name_shared(site: &'static Site) {
    static DEFAULT_NAMES: Mutex<Vec<(&'static str, usize)>> = Mutex::new(Vec::new());
    let address = site as *const Site as usize;
    let mut names = DEFAULT_NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if names.iter().any(|&(name, other)| name == site.name && other != address) {
        tracing::warn!(
            target: "ratelimit",
            limiter = site.name,
            "two #[rate_limit] functions have the default name `{}` (methods of two types in one module?), so they share one limit; give each a `name = \"...\"` if that is not intended",
            site.name
        );
    }
    if !names.contains(&(site.name, address)) {
        names.push((site.name, address));
    }
}

/// A backend that only reports why the real one could not be built, so the
/// site's `on_error` settles the call.
pub(crate) struct Unavailable(pub(crate) crate::Error);

impl crate::Backend for Unavailable {
    fn decide<'a>(
        &'a self,
        _: crate::backend::Request<'a>,
    ) -> crate::backend::BoxFuture<'a, Result<crate::backend::Outcome, crate::Error>> {
        Box::pin(async move { Err(self.0.clone()) })
    }
    fn reset<'a>(&'a self, _: &'a [u8]) -> crate::backend::BoxFuture<'a, Result<(), crate::Error>> {
        Box::pin(async move { Err(self.0.clone()) })
    }
    fn kind(&self) -> &'static str {
        "unavailable"
    }
}

/// The return type of a function whose denials are returned (`on_limit =
/// "error"`, or `"wait"` with a maximum): a `Result` whose error can hold a
/// [`RateLimited`]. Generated code calls it spanned at the return type, so a
/// wrong type is reported there with this message.
#[diagnostic::on_unimplemented(
    message = "`#[rate_limit]` returns a denial as `Err(..)`, but this function returns `{Self}`, which is not a `Result`",
    label = "a denied call must be returned here",
    note = "return `Result<_, E>` where `E: From<ratelimit::RateLimited>`, or choose `on_limit = \"wait\"` (no `max_wait`) or `fallback = path::to::fn`"
)]
pub trait IntoDenial: Sized {
    /// The value a denied call returns, from the denial [`Site::check_at_once`]
    /// or [`Site::check_pending`] gave.
    fn from_denial(denied: Box<RateLimited>) -> Self;
}

impl<T, E: DenialError> IntoDenial for Result<T, E> {
    fn from_denial(denied: Box<RateLimited>) -> Self {
        Err(E::from_denial(*denied))
    }
}

/// The error type of such a `Result`. The blanket impl is marked
/// `do_not_recommend` so rustc reports this trait's message, not a bare
/// `From` bound on an internal impl.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold a rate limit denial: it does not implement `From<ratelimit::RateLimited>`",
    label = "a denied call returns `Err(ratelimit::RateLimited)` converted into `{Self}`",
    note = "add `impl From<ratelimit::RateLimited> for {Self}` (or a `#[from] ratelimit::RateLimited` variant with thiserror), or choose `on_limit = \"wait\"` or `fallback = path::to::fn`"
)]
pub trait DenialError {
    /// Converts the denial.
    fn from_denial(denied: RateLimited) -> Self;
}

#[diagnostic::do_not_recommend]
impl<E: From<RateLimited>> DenialError for E {
    fn from_denial(denied: RateLimited) -> Self {
        E::from(denied)
    }
}

/// The function named by `fallback = path`, called with the limited
/// function's arguments (`self` first for methods) as a tuple.
#[diagnostic::on_unimplemented(
    message = "the fallback `{Self}` cannot be called with the limited function's arguments `{Args}`",
    label = "must be an async fn taking `{Args}`",
    note = "a denied call returns `fallback(same arguments).await`: give the fallback the same parameters (for a method, `self` first, e.g. `fallback = Self::cached`) and make it `async`"
)]
pub trait Fallback<Args> {
    /// What the fallback returns.
    type Future: Future;
    /// Calls it.
    fn call(self, args: Args) -> Self::Future;
}

macro_rules! fallback_arity {
    ($($arg:ident),*) => {
        #[diagnostic::do_not_recommend]
        impl<Function, Output, $($arg),*> Fallback<($($arg,)*)> for Function
        where
            Function: FnOnce($($arg),*) -> Output,
            Output: Future,
        {
            type Future = Output;
            #[allow(non_snake_case)]
            fn call(self, ($($arg,)*): ($($arg,)*)) -> Output {
                self($($arg),*)
            }
        }
    };
}
fallback_arity!();
fallback_arity!(A1);
fallback_arity!(A1, A2);
fallback_arity!(A1, A2, A3);
fallback_arity!(A1, A2, A3, A4);
fallback_arity!(A1, A2, A3, A4, A5);
fallback_arity!(A1, A2, A3, A4, A5, A6);
fallback_arity!(A1, A2, A3, A4, A5, A6, A7);
fallback_arity!(A1, A2, A3, A4, A5, A6, A7, A8);
fallback_arity!(A1, A2, A3, A4, A5, A6, A7, A8, A9);
fallback_arity!(A1, A2, A3, A4, A5, A6, A7, A8, A9, A10);
fallback_arity!(A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11);
fallback_arity!(A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12);

/// An argument used as `cost = arg`: any unsigned integer, or a reference to one.
#[diagnostic::on_unimplemented(
    message = "`cost` must be an unsigned integer, but this argument is `{Self}`",
    label = "used as the call's cost",
    note = "pass a `u8`, `u16`, `u32`, `u64` or `usize` argument (or a literal, like `cost = 5`)"
)]
pub trait Cost {
    /// The permits one call takes.
    fn cost(&self) -> u64;
}

macro_rules! unsigned_cost {
    ($($t:ty),*) => {$(
        impl Cost for $t {
            fn cost(&self) -> u64 {
                *self as u64
            }
        }
    )*};
}
unsigned_cost!(u8, u16, u32, u64, usize);

#[diagnostic::do_not_recommend]
impl<T: Cost + ?Sized> Cost for &T {
    fn cost(&self) -> u64 {
        (**self).cost()
    }
}

#[diagnostic::do_not_recommend]
impl<T: Cost + ?Sized> Cost for &mut T {
    fn cost(&self) -> u64 {
        (**self).cost()
    }
}
