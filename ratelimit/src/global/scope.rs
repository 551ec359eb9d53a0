//! [`scope`]: a store of its own for the annotated functions and layers a
//! future runs, instead of the global one: how a test gives each case its
//! own store (and clock) in one test binary.

use crate::global::live_scopes::LiveScopes;
use crate::limiter::on_error::OnError;
use crate::limiter::Limiter;
use crate::policy::Policy;
use crate::store::Store;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

tokio::task_local! {
    static SCOPED: Arc<Scoped>;
}

/// The scopes that exist: while there are none, a call looks for none.
static LIVE: LiveScopes = LiveScopes::new();

/// A scope's store and the limiters built on it, by name, so the calls of
/// one scope share their deny cache and `OnError::Local` state as they
/// would on the global store.
struct Scoped {
    store: Store,
    limiters: Mutex<HashMap<Arc<str>, Limiter>>,
}

/// Runs `future` with `store` in place of the global store for every
/// `#[rate_limit]` function and every layer built with
/// `http::RateLimitLayer::new` (feature `axum`; or `named`, `tiered`,
/// `per_request`, `per_route`) that it calls, however deep: the way to test
/// annotated code, each test with its own store and [`ManualClock`](crate::ManualClock).
/// Limiters you build yourself keep the store they were built on. Like any
/// task-local value it does not follow a `tokio::spawn`: wrap the spawned
/// future in a scope of its own (the same `store`, cloned, shares its keys).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{rate_limit, ManualClock, RateLimited, Store};
///
/// #[rate_limit(name = "search", algo = "fixed_window", strategies = "2/1m", key = "<user>")]
/// async fn search(user: &str) -> Result<(), RateLimited> {
///     Ok(())
/// }
///
/// let (one, two) = (Store::memory().with_clock(ManualClock::new()), Store::memory().with_clock(ManualClock::new()));
/// redlimit::scope(one.clone(), async {
///     assert!(search("ann").await.is_ok() && search("ann").await.is_ok());
///     assert!(search("ann").await.is_err(), "2 a minute, on `one`");
/// })
/// .await;
/// redlimit::scope(two, async { assert!(search("ann").await.is_ok(), "`two` has its own counts") }).await;
/// redlimit::scope(one, async { assert!(search("ann").await.is_err(), "`one` kept its counts") }).await;
/// # }
/// ```
pub async fn scope<F: Future>(store: Store, future: F) -> F::Output {
    let _live = LIVE.enter();
    let scoped = Scoped { store, limiters: Mutex::default() };
    SCOPED.scope(Arc::new(scoped), future).await
}

/// Whether the calling task may be inside a [`scope`]: when not, it is
/// not, and [`limiter`] need not be asked.
#[inline]
pub(crate) fn may_be_inside() -> bool {
    LIVE.any()
}

/// Inside a [`scope`]: the limiter named `name` on the scope's store,
/// deciding by `policy` (`Err` passes through why no policy is known).
pub(crate) fn limiter(
    name: &str,
    policy: Result<&Policy, Arc<str>>,
    on_error: OnError,
) -> Option<Result<Limiter, Arc<str>>> {
    SCOPED
        .try_with(|scoped| {
            let policy = policy?;
            // Nothing panics while the lock is held; a poisoned map is still whole.
            let mut limiters = scoped.limiters.lock().unwrap_or_else(PoisonError::into_inner);
            let limiter = limiters
                .entry(Arc::from(name))
                .or_insert_with(|| Limiter::new(name, policy.clone(), &scoped.store).with_on_error(on_error));
            Ok(limiter.with_policy(policy))
        })
        .ok()
}
