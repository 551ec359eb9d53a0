//! The global store that annotated functions use.

use crate::{Error, Store};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

static GLOBAL: OnceCell<Store> = OnceCell::const_new();

/// The last failure to build the global store, so calls made right after it
/// fail at once instead of each waiting out another connect attempt.
static LAST_FAILURE: Mutex<Option<(Instant, Error)>> = Mutex::new(None);

/// How long a failure to build the global store is answered from memory
/// before the next call tries to connect again.
pub const GLOBAL_RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// The environment variable naming the Redis of the global store.
pub const REDIS_URL_VAR: &str = "RATELIMIT_REDIS_URL";

/// Sets the global store that `#[rate_limit]` functions use.
///
/// Call it once at start-up, before the first limited call; without it the
/// first call reads `RATELIMIT_REDIS_URL` (unset: the in-memory store).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// ratelimit::init(ratelimit::Store::memory()).unwrap();
/// assert!(matches!(ratelimit::init(ratelimit::Store::memory()), Err(ratelimit::Error::AlreadyInitialized)));
/// # }
/// ```
pub fn init(store: Store) -> Result<(), Error> {
    GLOBAL.set(store).map_err(|_| Error::AlreadyInitialized)
}

/// The global store, built on first use from the environment when
/// [`init`] was not called: `RATELIMIT_REDIS_URL` set means Redis; unset
/// means the in-memory store, said once in a log line.
///
/// An unreachable URL is an error, returned within the connect timeout;
/// for a second after that (`GLOBAL_RETRY_INTERVAL`), calls get the same error at
/// once, then the next call tries to connect again.
pub async fn global() -> Result<&'static Store, Error> {
    if let Some(store) = GLOBAL.get() {
        return Ok(store);
    }
    if let Some((at, error)) = &*LAST_FAILURE.lock().unwrap_or_else(|p| p.into_inner()) {
        if at.elapsed() < GLOBAL_RETRY_INTERVAL {
            return Err(error.clone());
        }
    }
    let result = GLOBAL.get_or_try_init(from_env).await;
    if let Err(error) = &result {
        *LAST_FAILURE.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), error.clone()));
    }
    result
}

/// Builds a store as the global one would be built from the environment.
pub async fn from_env() -> Result<Store, Error> {
    match std::env::var(REDIS_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => {
            let store = Store::redis(url.trim()).await?;
            tracing::info!(target: "ratelimit", "rate limits are decided on Redis ({REDIS_URL_VAR} is set)");
            Ok(store)
        }
        _ => {
            tracing::info!(
                target: "ratelimit",
                "{REDIS_URL_VAR} is not set: rate limits are decided in memory, per process"
            );
            Ok(Store::memory())
        }
    }
}
