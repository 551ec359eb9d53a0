//! The global store that annotated functions use, and how it is connected:
//! in the background, so calls never wait on a Redis that cannot be reached.

use crate::clock::process_now_us;
use crate::error::Failure;
use crate::outage_log::{rounded, OutageLog, Recovery, Report};
use crate::{Error, RedisOptions, Store};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{Notify, OnceCell};

static GLOBAL: OnceCell<Store> = OnceCell::const_new();

/// The background connect to `REDLIMIT_REDIS_URL`: its task, and the last
/// attempt's failure while no attempt has succeeded.
static CONNECTOR: Mutex<Connector> = Mutex::new(Connector { task: None, failure: None });

/// Woken after every attempt of the background connect.
static ATTEMPTED: Notify = Notify::const_new();

struct Connector {
    task: Option<tokio::task::JoinHandle<()>>,
    failure: Option<Error>,
}

/// The first wait before the background connect tries again after a
/// failure; each further failure doubles it, up to [`MAX_RETRY_INTERVAL`].
pub(crate) const GLOBAL_RETRY_INTERVAL: Duration = Duration::from_millis(250);
const MAX_RETRY_INTERVAL: Duration = Duration::from_secs(4);

/// The environment variable naming the Redis of the global store.
pub const REDIS_URL_VAR: &str = "REDLIMIT_REDIS_URL";

/// Builds the global store from the environment, waiting for it, and
/// installs it: the one call to make at start-up, before the first limited
/// call, so a wrong configuration stops the program instead of turning
/// limiting off.
///
/// `REDLIMIT_REDIS_URL` set: connects to that Redis (any URL form
/// [`Store::redis`] takes) within its connect timeout (1 s); the error says
/// what failed: a malformed URL ([`Error::InvalidConfig`], naming the wrong
/// part), nothing listening or TLS failing ([`Error::Connection`]), wrong
/// credentials ([`Error::Auth`]). Unset or empty: the in-memory store (said
/// in a log line). [`Error::AlreadyInitialized`] if a global store is
/// already set ([`init`], or a limited call made before).
///
/// Without this call, the first limited call reads the environment itself
/// (see [`global`]): Redis is then connected in the background while calls
/// are settled by their `on_error`, and a failure is only logged.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// std::env::set_var(redlimit::REDIS_URL_VAR, "redis://app:s3cret@127.0.0.1:x");
/// let error = redlimit::init_from_env().await.unwrap_err();
/// assert_eq!(error.to_string(), "invalid Redis URL redis://app:***@127.0.0.1:x: invalid port `x` in `127.0.0.1:x`");
///
/// std::env::remove_var(redlimit::REDIS_URL_VAR);
/// assert_eq!(redlimit::init_from_env().await.unwrap().backend().kind(), "memory");
/// assert!(matches!(redlimit::init_from_env().await, Err(redlimit::Error::AlreadyInitialized)));
/// # }
/// ```
pub async fn init_from_env() -> Result<&'static Store, Error> {
    if GLOBAL.initialized() {
        return Err(Error::AlreadyInitialized);
    }
    let store = match redis_url() {
        Some(url) => {
            let store = Store::redis(&url).await?;
            tracing::info!(target: "redlimit", "rate limits are decided on Redis ({REDIS_URL_VAR} is set)");
            store
        }
        None => memory(),
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
/// means Redis; unset means the in-memory store, said once in a log line.
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
    if let Err(malformed) = crate::backend::redis::check_url(&url) {
        report_malformed(&url, &malformed);
        return Err(malformed);
    }
    let attempted = ATTEMPTED.notified();
    tokio::pin!(attempted);
    // Registered before looking, so an attempt that ends meanwhile still wakes this call.
    attempted.as_mut().enable();
    if let Some(failure) = connect_in_background(&url)? {
        return Err(failure);
    }
    let _ = tokio::time::timeout(RedisOptions::default().response_timeout, attempted).await;
    if let Some(store) = GLOBAL.get() {
        return Ok(store);
    }
    let failure = CONNECTOR.lock().unwrap_or_else(|p| p.into_inner()).failure.clone();
    Err(failure.unwrap_or_else(|| {
        Error::Unavailable(Failure::new(format!(
            "still connecting to Redis at {}",
            crate::backend::redis::redact(&url)
        )))
    }))
}

/// Logs a malformed `REDLIMIT_REDIS_URL` at ERROR, once per value.
fn report_malformed(url: &str, error: &Error) {
    static REPORTED: Mutex<Option<String>> = Mutex::new(None);
    let mut reported = REPORTED.lock().unwrap_or_else(|p| p.into_inner());
    if reported.as_deref() != Some(url) {
        tracing::error!(target: "redlimit", %error,
            "{REDIS_URL_VAR} is not a usable Redis URL; every rate limited call is settled by its on_error until it is fixed");
        *reported = Some(url.to_string());
    }
}

/// Starts the background connect unless it runs; the last attempt's failure,
/// if the last attempt failed.
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

/// Connects to `url` until it succeeds (or [`init`] sets a store), backing
/// off; failed attempts are logged as an outage is (`outage_log.rs`).
async fn connect(url: String) {
    static ATTEMPTS: OutageLog = OutageLog::new();
    let mut wait = GLOBAL_RETRY_INTERVAL;
    while GLOBAL.get().is_none() {
        let attempt = Store::redis(&url).await;
        let failed = match attempt {
            Ok(store) => {
                match ATTEMPTS.answered(process_now_us) {
                    Some(Recovery { lasted, failures }) => tracing::info!(target: "redlimit",
                        "rate limits are decided on Redis ({REDIS_URL_VAR} is set), connected after {failures} failed attempts over {:?}",
                        rounded(lasted)),
                    None => {
                        tracing::info!(target: "redlimit", "rate limits are decided on Redis ({REDIS_URL_VAR} is set)")
                    }
                }
                // Set by `init` meanwhile: that one stays.
                let _ = GLOBAL.set(store);
                None
            }
            Err(error) => {
                match ATTEMPTS.failed(process_now_us()) {
                    Some(Report::First { .. }) => tracing::error!(target: "redlimit", %error,
                        "cannot connect the global rate limit store to Redis ({REDIS_URL_VAR}); every rate limited call is settled by its on_error until it connects; trying again in the background"),
                    Some(Report::Ongoing { failures, over }) => tracing::warn!(target: "redlimit", %error,
                        "still cannot connect the global rate limit store to Redis: {failures} failed attempts in the last {:?}; trying again in {wait:?}",
                        rounded(over)),
                    None => {
                        tracing::debug!(target: "redlimit", %error, "cannot connect the global rate limit store to Redis; trying again in {wait:?}")
                    }
                }
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
