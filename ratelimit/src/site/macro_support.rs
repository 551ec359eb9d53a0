//! The traits `#[rate_limit]` output calls through, each with a diagnostic
//! that reads as the attribute's own error at the user's token.

use crate::policy::{Params, Policy};
use crate::rate_limited::RateLimited;
use redlimit_grammar::{Rate, Strategy};
use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

/// The return type of a function whose denials are returned (`on_limit =
/// "error"`, or `"wait"` with a maximum): a `Result` whose error can hold a
/// [`RateLimited`]. Generated code calls it spanned at the return type, so a
/// wrong type is reported there with this message.
#[diagnostic::on_unimplemented(
    message = "`#[rate_limit]` returns a denial as `Err(..)`, but this function returns `{Self}`, which is not a `Result`",
    label = "a denied call must be returned here",
    note = "return `Result<_, E>` where `E: From<redlimit::RateLimited>`, or choose `on_limit = \"wait\"` (no `max_wait`) or `fallback = path::to::fn`"
)]
pub trait IntoDenial: Sized {
    /// The value a denied call returns, from the denial
    /// [`Site::call`](crate::__private::Site::call) gave.
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
    message = "`{Self}` cannot hold a rate limit denial: it does not implement `From<redlimit::RateLimited>`",
    label = "a denied call returns `Err(redlimit::RateLimited)` converted into `{Self}`",
    note = "add `impl From<redlimit::RateLimited> for {Self}` (or a `#[from] redlimit::RateLimited` variant with thiserror), or choose `on_limit = \"wait\"` or `fallback = path::to::fn`"
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

/// The return type of a function with `refund_on = "err"`: a `Result`,
/// whose `Err(..)` gives the call's permits back. Generated code calls it
/// spanned at the return type, so a wrong type is reported there.
#[diagnostic::on_unimplemented(
    message = "`refund_on = \"err\"` gives the permits back when the function returns `Err(..)`, but this function returns `{Self}`, which is not a `Result`",
    label = "must be a `Result` for `refund_on = \"err\"`",
    note = "return `Result<_, E>`, or remove `refund_on`"
)]
pub trait Failed {
    /// The body failed: its permits are given back.
    fn failed(&self) -> bool;
}

impl<T, E> Failed for Result<T, E> {
    fn failed(&self) -> bool {
        self.is_err()
    }
}

/// The function named by `settle = path`: what the call cost, read from the
/// function's result (`Result`s included: an `Err` can say 0).
#[diagnostic::on_unimplemented(
    message = "`settle` must name a function of the result, `fn(&{R}) -> u64`",
    label = "not a `fn(&{R}) -> u64`",
    note = "a settled call's cost is an estimate; once the function returns, `settle`'s function reads what the call actually cost from its result: give it one parameter, `&{R}`, and return the cost as a `u64`"
)]
pub trait Settles<R> {
    /// The actual cost `result` says the call had.
    fn actual(&self, result: &R) -> u64;
}

impl<R, F: Fn(&R) -> u64> Settles<R> for F {
    fn actual(&self, result: &R) -> u64 {
        self(result)
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

/// The value of `policy = <expression>`: the policy deciding this call,
/// owned, borrowed or shared. Generated code calls it spanned at the
/// expression, so a wrong type is reported there with this message.
#[diagnostic::on_unimplemented(
    message = "`policy = ...` must give a `redlimit::Policy`, but this expression is `{Self}`",
    label = "the policy deciding this call",
    note = "give a `Policy`, a `&Policy` or an `Arc<Policy>` (an `Option` needs a default first, e.g. `.unwrap_or(...)`); for a policy configured by name, write a string: `policy = \"search\"`"
)]
pub trait AsPolicy {
    /// The policy.
    fn as_policy(&self) -> &Policy;
}

impl AsPolicy for Policy {
    fn as_policy(&self) -> &Policy {
        self
    }
}

impl AsPolicy for Arc<Policy> {
    fn as_policy(&self) -> &Policy {
        self
    }
}

impl AsPolicy for Box<Policy> {
    fn as_policy(&self) -> &Policy {
        self
    }
}

#[diagnostic::do_not_recommend]
impl<T: AsPolicy + ?Sized> AsPolicy for &T {
    fn as_policy(&self) -> &Policy {
        (**self).as_policy()
    }
}

/// Constructors for macro output: the macro has already validated these
/// parameters with the same grammar, so no check runs at run time.
impl Policy {
    #[doc(hidden)]
    pub const fn __fixed_window(strategies: &'static [Strategy]) -> Policy {
        Policy::new(Params::FixedWindow { strategies: Cow::Borrowed(strategies) })
    }
    #[doc(hidden)]
    pub const fn __sliding_window(strategies: &'static [Strategy], precision_us: u64) -> Policy {
        Policy::new(Params::SlidingWindow { strategies: Cow::Borrowed(strategies), precision_us })
    }
    #[doc(hidden)]
    pub const fn __sliding_log(strategies: &'static [Strategy]) -> Policy {
        Policy::new(Params::SlidingLog { strategies: Cow::Borrowed(strategies) })
    }
    #[doc(hidden)]
    pub const fn __token_bucket(capacity: u64, rate: Rate) -> Policy {
        Policy::new(Params::TokenBucket { capacity, rate, refill: crate::policy::Refill::Continuous })
    }
    #[doc(hidden)]
    pub const fn __token_bucket_interval(capacity: u64, rate: Rate) -> Policy {
        Policy::new(Params::TokenBucket { capacity, rate, refill: crate::policy::Refill::Interval })
    }
    #[doc(hidden)]
    pub const fn __leaky_bucket(capacity: u64, rate: Rate) -> Policy {
        Policy::new(Params::LeakyBucket { capacity, rate })
    }
    #[doc(hidden)]
    pub const fn __gcra(rate: Rate, burst: u64) -> Policy {
        Policy::new(Params::Gcra { rate, burst })
    }
    #[doc(hidden)]
    pub const fn __concurrency(limit: u64, lease_us: u64) -> Policy {
        Policy::new(Params::Concurrency { limit, lease_us })
    }
}
