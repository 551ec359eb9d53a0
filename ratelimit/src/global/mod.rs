//! The global store that annotated functions use: set at start-up, or
//! built from the environment by the first limited call.

mod implicit;
pub(crate) mod lazy;
pub(crate) mod live_scopes;
#[cfg(feature = "redis")]
pub(crate) mod redis;
pub(crate) mod scope;

use crate::error::Error;
use crate::store::Store;
use tokio::sync::OnceCell;

static GLOBAL: OnceCell<Store> = OnceCell::const_new();

/// The environment variable naming the Redis of the global store.
pub const REDIS_URL_VAR: &str = "REDLIMIT_REDIS_URL";

/// Builds the global store from the environment, waiting for it, and
/// installs it: the one call to make at start-up, before the first limited
/// call, so a wrong configuration stops the program instead of turning
/// limiting off.
///
/// `REDLIMIT_REDIS_URL` set: connects to that Redis (any URL form
/// `Store::redis` takes) within its connect timeout (1 s); the error says
/// what failed: a malformed URL ([`Error::InvalidConfig`], naming the wrong
/// part), nothing listening or TLS failing ([`Error::Connection`]), wrong
/// credentials, or none where the server requires them ([`Error::Auth`]:
/// start-up sends a `PING`, which a server wanting a password refuses). Unset or empty: the in-memory store (said
/// in a log line). [`Error::AlreadyInitialized`] if a global store is
/// already set ([`init`], or a limited call made before).
///
/// Without this call, the first limited call reads the environment itself
/// (see [`global`]): Redis is then connected in the background while calls
/// are settled by their `on_error`, and a failure is only logged.
///
/// ```
/// # #[cfg(feature = "redis")]
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// std::env::set_var(redlimit::REDIS_URL_VAR, "redis://app:s3cret@127.0.0.1:x");
/// let error = redlimit::init_from_env().await.unwrap_err();
/// assert_eq!(error.to_string(), "invalid Redis URL redis://app:***@127.0.0.1:x: invalid port `x` in `127.0.0.1:x`");
///
/// std::env::remove_var(redlimit::REDIS_URL_VAR);
/// assert_eq!(redlimit::init_from_env().await.unwrap().kind(), "memory");
/// assert!(matches!(redlimit::init_from_env().await, Err(redlimit::Error::AlreadyInitialized)));
/// # }
/// # #[cfg(not(feature = "redis"))] fn main() {}
/// ```
pub async fn init_from_env() -> Result<&'static Store, Error> {
    if GLOBAL.initialized() {
        return Err(Error::AlreadyInitialized);
    }
    let store = match redis_url() {
        #[cfg(not(feature = "redis"))]
        Some(_) => return Err(without_redis()),
        #[cfg(feature = "redis")]
        Some(url) => {
            let store = Store::redis(&url).await?;
            tracing::info!(target: "redlimit", "rate limits are decided on Redis ({REDIS_URL_VAR} is set)");
            store
        }
        None => {
            tracing::info!(target: "redlimit", "{REDIS_URL_VAR} is not set: rate limits are decided in memory, per process");
            Store::memory()
        }
    };
    init(store)?;
    GLOBAL.get().ok_or(Error::AlreadyInitialized)
}

/// Sets the global store that `#[rate_limit]` functions use.
///
/// Call it (or [`init_from_env`]) once at start-up, before the first
/// limited call; without either, the first call reads `REDLIMIT_REDIS_URL`
/// (see [`global`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// redlimit::init(redlimit::Store::memory()).unwrap();
/// assert!(matches!(redlimit::init(redlimit::Store::memory()), Err(redlimit::Error::AlreadyInitialized)));
/// # }
/// ```
pub fn init(store: Store) -> Result<(), Error> {
    GLOBAL.set(store).map_err(|_| Error::AlreadyInitialized)
}

/// The global store, built on first use from the environment when neither
/// [`init`] nor [`init_from_env`] was called: `REDLIMIT_REDIS_URL` set
/// means Redis; unset means the in-memory store, said once in a WARN line.
///
/// A store built this way refuses every call while a [`Scope`](crate::Scope)
/// is live: each fails with an [`Error::Misuse`] saying so, which no
/// `on_error` lets through and its limiter logs once. A process that made
/// a scope (a test) meant its calls for that scope's store, and one that
/// reaches this store instead (a task spawned out of its scope, a server
/// not wrapped in `http::ScopeLayer`) would otherwise pass on an in-memory
/// store, on the real clock.
///
/// Redis is connected in the background, started by the first call. No
/// call waits longer than the default response timeout (250 ms) for it:
/// until it is connected, calls get an error (at once after an attempt has
/// failed, the attempt's error), which `on_error` settles. A failed attempt
/// is logged at ERROR the first time, then at most once every 10 s, and
/// tried again after 250 ms, then twice as long each time up to 4 s. A
/// malformed URL is not tried at all: it is logged at ERROR once and every
/// call gets its [`Error::InvalidConfig`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// std::env::remove_var(redlimit::REDIS_URL_VAR);
/// assert_eq!(redlimit::global().await.unwrap().kind(), "memory");
/// # }
/// ```
pub async fn global() -> Result<&'static Store, Error> {
    if let Some(store) = GLOBAL.get() {
        return Ok(store);
    }
    let Some(url) = redis_url() else {
        return Ok(GLOBAL.get_or_init(|| async { memory() }).await);
    };
    on_redis(&url).await
}

/// The global store on the Redis at `url`, connected in the background.
#[cfg(feature = "redis")]
async fn on_redis(url: &str) -> Result<&'static Store, Error> {
    crate::global::redis::global(url, &GLOBAL).await
}

/// Built without Redis, a Redis URL in the environment is a mistake to
/// report, not a reason to decide in memory: every call's `on_error` settles.
#[cfg(not(feature = "redis"))]
async fn on_redis(_url: &str) -> Result<&'static Store, Error> {
    static REPORTED: std::sync::Once = std::sync::Once::new();
    let error = without_redis();
    REPORTED.call_once(|| tracing::error!(target: "redlimit", %error, "the global rate limit store cannot be built"));
    Err(error)
}

#[cfg(not(feature = "redis"))]
fn without_redis() -> Error {
    Error::InvalidConfig(format!(
        "{REDIS_URL_VAR} is set, but redlimit was built without its `redis` feature: enable it, or unset {REDIS_URL_VAR}"
    ))
}

fn redis_url() -> Option<String> {
    std::env::var(REDIS_URL_VAR).ok().map(|url| url.trim().to_string()).filter(|url| !url.is_empty())
}

/// The in-memory store built for want of any other: said at WARN, since an
/// app that set a store for its own limiters may have meant it for these too.
fn memory() -> Store {
    tracing::warn!(target: "redlimit",
        "no global rate limit store was set (redlimit::init) and {REDIS_URL_VAR} is not set: \
         rate limits are decided in memory, per process");
    implicit::implicit(Store::memory())
}
