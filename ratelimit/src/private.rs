//! Everything `#[rate_limit]` output calls. Not a public API: names and
//! signatures here change with the macro, which is pinned to this crate.
//!
//! Generated code names nothing else: every path it writes is
//! `::ratelimit::__private::...` (or the `crate = "..."` override), so a user's
//! `mod core {}`, `type Result` or `struct String` cannot change its meaning.

pub use crate::key::push_key_value;
pub use crate::policy::Policy;
pub use crate::{OnError, RateLimited};
pub use ratelimit_grammar::{Rate, Strategy};
pub use std::string::String;

use crate::{runtime, Limiter};
use std::sync::{Arc, OnceLock};
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
    policy: Policy,
    on_limit: OnLimit,
    on_error: OnError,
    limiter: OnceCell<Limiter>,
    /// Settles calls while the global store cannot be built (keeps the
    /// in-memory state of `on_error = "local"` between calls).
    degraded: OnceLock<Limiter>,
}

impl Site {
    /// A site; `policy` comes from a constant the macro validated at compile time.
    pub const fn new(name: &'static str, policy: Policy, on_limit: OnLimit, on_error: OnError) -> Site {
        Site { name, policy, on_limit, on_error, limiter: OnceCell::const_new(), degraded: OnceLock::new() }
    }

    async fn limiter(&'static self) -> Result<&'static Limiter, crate::Error> {
        self.limiter
            .get_or_try_init(|| async {
                let store = runtime::global().await?;
                Ok(Limiter::new(self.name, self.policy.clone(), store).with_on_error(self.on_error))
            })
            .await
    }

    /// Decides one call: `Ok(())` to run the body, `Err` to return the denial
    /// (or call the fallback). Under `OnLimit::Wait` this sleeps until the
    /// call passes or the maximum wait would be exceeded.
    ///
    /// When the global store cannot even be built, the site's `on_error`
    /// decides, as for any other store failure (never a panic).
    pub async fn check(&'static self, key: &str, cost: u64) -> Result<(), RateLimited> {
        let limiter = match self.limiter().await {
            Ok(limiter) => limiter,
            Err(error) => self.degraded.get_or_init(|| {
                let store = crate::Store::from_backend(Arc::new(Unavailable(error)));
                Limiter::new(self.name, self.policy.clone(), &store).with_on_error(self.on_error)
            }),
        };
        match self.on_limit {
            OnLimit::Error => limiter.limit(key, cost).await.map(drop),
            OnLimit::Wait(max) => limiter.wait(key, cost, max).await.map(drop),
        }
    }

    /// [`check`](Self::check) for a function that has no way to return a
    /// denial: `on_limit = "wait"` with no maximum, a literal cost the policy
    /// admits and `on_error` other than `"deny"`. The macro only emits it when
    /// those hold, so every denial is waited out; should one still come back,
    /// the call goes ahead (fail open, as `on_error = "allow"` does) with a warning.
    pub async fn admit(&'static self, key: &str, cost: u64) {
        if let Err(denied) = self.check(key, cost).await {
            tracing::warn!(target: "ratelimit", limiter = %self.name, %denied, "denial could not be waited out; call allowed");
        }
    }
}

/// A backend that only reports why the real one could not be built, so the
/// site's `on_error` settles the call.
struct Unavailable(crate::Error);

impl crate::Backend for Unavailable {
    fn decide<'a>(&'a self, _: crate::backend::Request<'a>) -> crate::backend::BoxFuture<'a, Result<crate::backend::Outcome, crate::Error>> {
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
    /// The value a denied call returns.
    fn from_denial(denied: RateLimited) -> Self;
}

impl<T, E: DenialError> IntoDenial for Result<T, E> {
    fn from_denial(denied: RateLimited) -> Self {
        Err(E::from_denial(denied))
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
