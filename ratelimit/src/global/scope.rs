//! [`Scope`]: a store of its own for the annotated functions and layers a
//! future runs, instead of the global one: how a test gives each case its
//! own store (and clock) in one test binary, and how an app's requests and
//! the tasks they spawn all reach the test's store.

use crate::global::live_scopes::{LiveScope, LiveScopes};
use crate::limiter::on_error::OnError;
use crate::limiter::Limiter;
use crate::policy::Policy;
use crate::store::Store;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

tokio::task_local! {
    static SCOPED: Scope;
}

/// The scopes that exist: while there are none, a call looks for none.
static LIVE: LiveScopes = LiveScopes::new();

/// A store that every `#[rate_limit]` function and every layer built on the
/// global store decides on, in place of the global store, while a future
/// [`run`](Scope::run)s in it: the way to test code that uses the global
/// store, each test with its own store and [`ManualClock`](crate::ManualClock).
///
/// The layers are those built with `http::RateLimitLayer::new` (feature
/// `axum`), `named`, `tiered`, `per_request` or `per_route`. Limiters you
/// build yourself keep the store they were built on: build them on the
/// scope's store. A scope is task-local, so a task spawned inside it is not
/// in it unless its future is wrapped by [`in_current_scope`]; a server's
/// requests each run in their own task, which `http::ScopeLayer` puts in a
/// scope. Every future run in one `Scope` (and its clones) shares the
/// limiters built on its store, with their deny caches and local state.
///
/// While any scope exists, a global store that was never set with
/// [`init`](crate::init) or [`init_from_env`](crate::init_from_env) refuses
/// every call (see [`global`](crate::global())): a call outside every scope
/// in a process that made one is almost certainly a test's call that missed
/// its store.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{rate_limit, ManualClock, RateLimited, Scope, Store};
///
/// #[rate_limit(name = "search", algo = "fixed_window", strategies = "2/1m", key = "<user>")]
/// async fn search(user: &str) -> Result<(), RateLimited> {
///     Ok(())
/// }
///
/// let scope = Scope::new(Store::memory().with_clock(ManualClock::new()));
/// assert!(scope.run(search("ann")).await.is_ok());
/// let task = tokio::spawn(scope.run(async { search("ann").await.is_ok() }));
/// assert!(task.await.unwrap(), "a spawned task, run in the same scope");
/// assert!(scope.run(search("ann")).await.is_err(), "2 a minute, on the scope's store");
/// # }
/// ```
#[derive(Clone)]
pub struct Scope(Arc<Scoped>);

/// A scope's store and the limiters built on it, by name, so the calls of
/// one scope share their deny cache and `OnError::Local` state as they
/// would on the global store.
struct Scoped {
    store: Store,
    limiters: Mutex<HashMap<Arc<str>, Limiter>>,
    /// Counted as live until the last clone of the scope is dropped.
    _live: LiveScope,
}

impl Scope {
    /// A scope deciding on `store` (clones of one store share its counts).
    pub fn new(store: Store) -> Scope {
        Scope(Arc::new(Scoped { store, limiters: Mutex::default(), _live: LIVE.enter() }))
    }

    /// The store its calls decide on.
    ///
    /// ```
    /// let scope = redlimit::Scope::new(redlimit::Store::memory());
    /// assert_eq!(scope.store().kind(), "memory");
    /// ```
    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// Runs `future` in this scope. The future returned owns a clone of the
    /// scope, so it can be spawned.
    pub fn run<F: Future>(&self, future: F) -> impl Future<Output = F::Output> {
        SCOPED.scope(self.clone(), future)
    }

    /// Calls `f` in this scope: for a service's `call`, which may decide
    /// before it returns its future (`http::ScopeLayer`'s only).
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) fn sync_run<R>(&self, f: impl FnOnce() -> R) -> R {
        SCOPED.sync_scope(self.clone(), f)
    }

    /// The scope the calling task runs in, if any.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use redlimit::{Scope, Store};
    ///
    /// assert!(Scope::current().is_none());
    /// let kind = Scope::new(Store::memory()).run(async { Scope::current().map(|s| s.store().kind()) });
    /// assert_eq!(kind.await, Some("memory"));
    /// # }
    /// ```
    pub fn current() -> Option<Scope> {
        if !may_be_inside() {
            return None;
        }
        SCOPED.try_with(Scope::clone).ok()
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Scope").field(&self.0.store).finish()
    }
}

/// Runs `future` with `store` in place of the global store:
/// `Scope::new(store).run(future)`, for a future that is the whole of a
/// test ([`Scope`] says what a scope reaches).
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
    Scope::new(store).run(future).await
}

/// `future` in the calling task's scope, if it runs in one, else as it is:
/// what to hand `tokio::spawn` for a task that calls annotated functions,
/// so that in a test it decides on the test's store like its parent.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{rate_limit, ManualClock, RateLimited, Store};
///
/// #[rate_limit(name = "export", algo = "fixed_window", strategies = "1/1h", key = "<user>")]
/// async fn export(user: &str) -> Result<(), RateLimited> {
///     Ok(())
/// }
///
/// redlimit::scope(Store::memory().with_clock(ManualClock::new()), async {
///     let job = tokio::spawn(redlimit::in_current_scope(async { export("ann").await.is_ok() }));
///     assert!(job.await.unwrap());
///     assert!(export("ann").await.is_err(), "the spawned task counted on the scope's store");
/// })
/// .await;
/// # }
/// ```
pub fn in_current_scope<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let scope = Scope::current();
    async move {
        match scope {
            Some(scope) => scope.run(future).await,
            None => future.await,
        }
    }
}

/// Whether the calling task may be inside a [`Scope`]: when not, it is
/// not, and [`limiter`] need not be asked.
#[inline]
pub(crate) fn may_be_inside() -> bool {
    LIVE.any()
}

/// Inside a [`Scope`]: the limiter named `name` on the scope's store,
/// deciding by `policy` (`Err` passes through why no policy is known).
pub(crate) fn limiter(
    name: &str,
    policy: Result<&Policy, Arc<str>>,
    on_error: OnError,
) -> Option<Result<Limiter, Arc<str>>> {
    SCOPED
        .try_with(|Scope(scoped)| {
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
