//! Everything `#[rate_limit]` output calls. Not a public API: names and
//! signatures here change with the macro, which is pinned to this crate.

pub use crate::key::push_key_value;
pub use crate::policy::Policy;
pub use ratelimit_grammar::{Rate, Strategy};

use crate::{runtime, Limiter, OnError, RateLimited};
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

    /// Decides one call: `Ok(())` to run the body, `Err` to return the denial.
    ///
    /// When the global store cannot even be built, the site's `on_error`
    /// decides, as for any other store failure (never a panic).
    pub async fn check(&'static self, key: &str, cost: u64) -> Result<(), RateLimited> {
        let limiter = match self.limiter().await {
            Ok(limiter) => limiter,
            Err(error) => {
                let degraded = self.degraded.get_or_init(|| {
                    let store = crate::Store::from_backend(Arc::new(Unavailable(error)));
                    Limiter::new(self.name, self.policy.clone(), &store).with_on_error(self.on_error)
                });
                return degraded.limit(key, cost).await.map(drop);
            }
        };
        match self.on_limit {
            OnLimit::Error => limiter.limit(key, cost).await.map(drop),
            OnLimit::Wait(max) => limiter.wait(key, cost, max).await.map(drop),
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
