//! The global store's background connect to the Redis that
//! `REDLIMIT_REDIS_URL` names, so calls never wait on a Redis that cannot be
//! reached (feature `redis`).

use crate::backend::RedisOptions;
use crate::clock::process_now_us;
use crate::error::{Error, Failure};
use crate::global::REDIS_URL_VAR;
use crate::limiter::outage_log::{rounded, OutageLog, Recovery, Report};
use crate::store::Store;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{Notify, OnceCell};

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
const GLOBAL_RETRY_INTERVAL: Duration = Duration::from_millis(250);
const MAX_RETRY_INTERVAL: Duration = Duration::from_secs(4);

/// The store in `global` once connected to `url`; until then the error
/// that `on_error` settles a call by. Waits at most the default response
/// timeout for an attempt under way.
pub(crate) async fn global(url: &str, global: &'static OnceCell<Store>) -> Result<&'static Store, Error> {
    if let Err(malformed) = crate::backend::redis::check_url(url) {
        report_malformed(url, &malformed);
        return Err(malformed);
    }
    let attempted = ATTEMPTED.notified();
    tokio::pin!(attempted);
    // Registered before looking, so an attempt that ends meanwhile still wakes this call.
    attempted.as_mut().enable();
    if let Some(failure) = connect_in_background(url, global)? {
        return Err(failure);
    }
    let _ = tokio::time::timeout(RedisOptions::default().response_timeout, attempted).await;
    if let Some(store) = global.get() {
        return Ok(store);
    }
    let failure = CONNECTOR.lock().unwrap_or_else(|p| p.into_inner()).failure.clone();
    Err(failure.unwrap_or_else(|| {
        Error::Unavailable(Failure::new(format!("still connecting to Redis at {}", crate::backend::redis::redact(url))))
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
fn connect_in_background(url: &str, global: &'static OnceCell<Store>) -> Result<Option<Error>, Error> {
    let mut connector = CONNECTOR.lock().unwrap_or_else(|p| p.into_inner());
    // A task ends only once connected, or with the runtime that ran it: start another then.
    if connector.task.as_ref().is_none_or(tokio::task::JoinHandle::is_finished) {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::InvalidConfig("the global Redis store needs a tokio runtime".into()))?;
        connector.task = Some(runtime.spawn(connect(url.to_string(), global)));
    }
    Ok(connector.failure.clone())
}

/// Connects to `url` until it succeeds (or `init` sets a store), backing
/// off; failed attempts are logged as an outage is (`outage_log.rs`).
async fn connect(url: String, global: &'static OnceCell<Store>) {
    static ATTEMPTS: OutageLog = OutageLog::new();
    let mut wait = GLOBAL_RETRY_INTERVAL;
    while global.get().is_none() {
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
                let _ = global.set(crate::global::implicit::implicit(store));
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
