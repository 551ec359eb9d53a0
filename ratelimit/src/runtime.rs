//! The global store that annotated functions use, and how it is connected:
//! in the background, so calls never wait on a Redis that cannot be reached.

#[cfg(feature = "redis")]
use crate::RedisOptions;
use crate::{Error, Store};
#[cfg(feature = "redis")]
use std::{sync::Mutex, time::Duration};
#[cfg(feature = "redis")]
use tokio::sync::Notify;
use tokio::sync::OnceCell;

static GLOBAL: OnceCell<Store> = OnceCell::const_new();

/// The background connect to `REDLIMIT_REDIS_URL`: its task, and the last
/// attempt's failure while no attempt has succeeded.
#[cfg(feature = "redis")]
static CONNECTOR: Mutex<Connector> = Mutex::new(Connector { task: None, failure: None });

/// Woken after every attempt of the background connect.
#[cfg(feature = "redis")]
static ATTEMPTED: Notify = Notify::const_new();

#[cfg(feature = "redis")]
struct Connector {
    task: Option<tokio::task::JoinHandle<()>>,
    failure: Option<Error>,
}

/// The first wait before the background connect tries again after a
/// failure; each further failure doubles it, up to [`MAX_RETRY_INTERVAL`].
#[cfg(feature = "redis")]
pub(crate) const GLOBAL_RETRY_INTERVAL: Duration = Duration::from_millis(250);
#[cfg(feature = "redis")]
const MAX_RETRY_INTERVAL: Duration = Duration::from_secs(4);

/// The environment variable naming the Redis of the global store.
pub const REDIS_URL_VAR: &str = "REDLIMIT_REDIS_URL";

/// Sets the global store that `#[rate_limit]` functions use.
///
/// Call it once at start-up, before the first limited call; without it the
/// first call reads `REDLIMIT_REDIS_URL` (unset: the in-memory store).
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

/// The global store, built on first use from the environment when
/// [`init`] was not called: `REDLIMIT_REDIS_URL` set means Redis; unset
/// means the in-memory store, said once in a log line.
///
/// Redis is connected in the background, started by the first call. No
/// call waits longer than the default response timeout (250 ms) for it:
/// until it is connected, calls get an error (at once after an attempt has
/// failed, the attempt's error), which `on_error` settles. A failed attempt
/// is tried again after 250 ms, then twice as long each time up to 4 s.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// std::env::remove_var(redlimit::REDIS_URL_VAR);
/// assert_eq!(redlimit::global().await.unwrap().backend().kind(), "memory");
/// # }
/// ```
pub async fn global() -> Result<&'static Store, Error> {
    if let Some(store) = GLOBAL.get() {
        return Ok(store);
    }
    let Some(url) = redis_url() else {
        return Ok(GLOBAL.get_or_init(|| async { memory() }).await);
    };
    redis_global(&url).await
}

/// The global store on the Redis at `url`, connected in the background.
#[cfg(feature = "redis")]
async fn redis_global(url: &str) -> Result<&'static Store, Error> {
    let attempted = ATTEMPTED.notified();
    tokio::pin!(attempted);
    // Registered before looking, so an attempt that ends meanwhile still wakes this call.
    attempted.as_mut().enable();
    if let Some(failure) = connect_in_background(url)? {
        return Err(failure);
    }
    let _ = tokio::time::timeout(RedisOptions::default().response_timeout, attempted).await;
    if let Some(store) = GLOBAL.get() {
        return Ok(store);
    }
    let failure = CONNECTOR.lock().unwrap_or_else(|p| p.into_inner()).failure.clone();
    Err(failure.unwrap_or_else(|| {
        Error::Unavailable(format!("still connecting to Redis at {}", crate::backend::redis::redact(url)))
    }))
}

/// Built without Redis, a Redis URL in the environment is a mistake to
/// report, not a reason to decide in memory: every call's `on_error` settles.
#[cfg(not(feature = "redis"))]
async fn redis_global(_url: &str) -> Result<&'static Store, Error> {
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

/// Starts the background connect unless it runs; the last attempt's failure,
/// if the last attempt failed.
#[cfg(feature = "redis")]
fn connect_in_background(url: &str) -> Result<Option<Error>, Error> {
    let mut connector = CONNECTOR.lock().unwrap_or_else(|p| p.into_inner());
    // A task ends only once connected, or with the runtime that ran it: start another then.
    if connector.task.as_ref().is_none_or(tokio::task::JoinHandle::is_finished) {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::InvalidConfig("the global Redis store needs a tokio runtime".into()))?;
        connector.task = Some(runtime.spawn(connect(url.to_string())));
    }
    Ok(connector.failure.clone())
}

/// Connects to `url` until it succeeds (or [`init`] sets a store), backing off.
#[cfg(feature = "redis")]
async fn connect(url: String) {
    let mut wait = GLOBAL_RETRY_INTERVAL;
    while GLOBAL.get().is_none() {
        let attempt = Store::redis(&url).await;
        let failed = match attempt {
            Ok(store) => {
                tracing::info!(target: "redlimit", "rate limits are decided on Redis ({REDIS_URL_VAR} is set)");
                // Set by `init` meanwhile: that one stays.
                let _ = GLOBAL.set(store);
                None
            }
            Err(error) => {
                tracing::warn!(target: "redlimit", %error, "cannot reach the global store's Redis; trying again in {wait:?}");
                Some(error)
            }
        };
        let done = failed.is_none();
        CONNECTOR.lock().unwrap_or_else(|p| p.into_inner()).failure = failed;
        ATTEMPTED.notify_waiters();
        if done {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_RETRY_INTERVAL);
    }
}

fn redis_url() -> Option<String> {
    std::env::var(REDIS_URL_VAR).ok().map(|url| url.trim().to_string()).filter(|url| !url.is_empty())
}

fn memory() -> Store {
    tracing::info!(target: "redlimit", "{REDIS_URL_VAR} is not set: rate limits are decided in memory, per process");
    Store::memory()
}

/// Builds a store as the global one would be built from the environment,
/// waiting for Redis up to its connect timeout (1 s).
pub async fn from_env() -> Result<Store, Error> {
    match redis_url() {
        #[cfg(not(feature = "redis"))]
        Some(_) => Err(without_redis()),
        #[cfg(feature = "redis")]
        Some(url) => {
            let store = Store::redis(&url).await?;
            tracing::info!(target: "redlimit", "rate limits are decided on Redis ({REDIS_URL_VAR} is set)");
            Ok(store)
        }
        None => Ok(memory()),
    }
}
