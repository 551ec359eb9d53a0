//! [`RedisBackend`]: one multiplexed, auto-reconnecting connection and the scripts.

use super::{Backend, BoxFuture, Outcome, Request, CLIENT_CLOCK_SLACK_US};
use crate::policy::Params;
use crate::{scripts, Error};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::TcpSettings;
use redis::IntoConnectionInfo;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Timeouts and retry settings of the Redis connection. Every default is set
/// here explicitly rather than inherited from redis-rs.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Bound on establishing a connection (default 1 s). Start-up fails with a
    /// clear error after this, instead of hanging.
    pub connect_timeout: Duration,
    /// Bound on one decision's round trip (default 250 ms). A call that takes
    /// longer is an [`Error::Timeout`]; it may still have run on the server, so
    /// it is never counted as a permit.
    pub response_timeout: Duration,
    /// Reconnect attempts after the connection drops (default 3, backing off from 50 ms).
    pub reconnect_retries: usize,
    /// After a failure to reach Redis, calls fail at once with
    /// [`Error::Unavailable`] for this long (default 250 ms) instead of each
    /// waiting out a timeout; then the next call tries Redis again.
    pub retry_interval: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_millis(250),
            reconnect_retries: 3,
            retry_interval: Duration::from_millis(250),
        }
    }
}

/// Decides on Redis: one `EVALSHA` of the policy's algorithm script per
/// decision, whatever the number of strategies.
///
/// One redis-rs [`ConnectionManager`] (multiplexed, reconnecting) serves every
/// limiter and task; scripts are loaded once at start-up and reloaded by
/// `redis::Script` on `NOSCRIPT` (after a restart, failover or `SCRIPT FLUSH`).
#[derive(Clone)]
pub struct RedisBackend {
    connection: ConnectionManager,
    options: RedisOptions,
    breaker: Arc<Breaker>,
}

impl RedisBackend {
    /// Connects to `url` and loads every script.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<RedisBackend, Error> {
        let info = url
            .into_connection_info()
            .map_err(|e| Error::InvalidConfig(format!("cannot parse Redis URL {}: {e}", redact(url))))?
            .set_tcp_settings(TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(options.reconnect_retries)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1));
        let connect = async {
            let mut connection = ConnectionManager::new_with_config(client, config).await?;
            for script in scripts::all() {
                script.prepare_invoke().load_async(&mut connection).await?;
            }
            Ok::<_, redis::RedisError>(connection)
        };
        // The manager retries a failed first connect; bound the whole start-up.
        let bound = options.connect_timeout * (options.reconnect_retries as u32 + 2);
        let connection = match tokio::time::timeout(bound, connect).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(e)) => return Err(Error::InvalidConfig(format!("cannot connect to Redis at {}: {e}", redact(url)))),
            Err(_) => return Err(Error::InvalidConfig(format!("cannot connect to Redis at {}: no answer within {bound:?}", redact(url)))),
        };
        Ok(RedisBackend { connection, options, breaker: Arc::new(Breaker::new()) })
    }

    /// The multiplexed connection (cheap to clone), e.g. for tests and benchmarks.
    pub fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }

    async fn eval(&self, request: Request<'_>) -> Result<Outcome, Error> {
        if let Some(failure) = self.breaker.open() {
            return Err(Error::Unavailable(failure));
        }
        let result = self.eval_on_redis(request).await;
        if let Err(error) = &result {
            if error.is_unavailable() {
                self.breaker.trip(error, self.options.retry_interval);
            }
        }
        result
    }

    async fn eval_on_redis(&self, request: Request<'_>) -> Result<Outcome, Error> {
        let mut invocation = scripts::script(request.policy.algorithm()).key(request.key);
        // ARGV: now ("" = server TIME), cost, peek, TTL slack, then parameters.
        match request.now_us {
            Some(now) => invocation.arg(now).arg(request.cost).arg(u8::from(request.peek)).arg(CLIENT_CLOCK_SLACK_US / 1000),
            None => invocation.arg("").arg(request.cost).arg(u8::from(request.peek)).arg(0),
        };
        match &request.policy.params {
            Params::FixedWindow { strategies } | Params::SlidingLog { strategies } => {
                invocation.arg(strategies.len());
                for s in strategies.iter() {
                    invocation.arg(s.limit).arg(s.window_us);
                }
            }
            Params::SlidingWindow { strategies, precision_us } => {
                invocation.arg(*precision_us).arg(strategies.len());
                for s in strategies.iter() {
                    invocation.arg(s.limit).arg(s.window_us);
                }
            }
            Params::TokenBucket { capacity, rate } | Params::LeakyBucket { capacity, rate } => {
                let (n, p) = rate.reduced();
                invocation.arg(*capacity).arg(n).arg(p);
            }
            Params::Gcra { rate, burst } => {
                let (n, p) = rate.reduced();
                invocation.arg(*burst).arg(n).arg(p);
            }
        }
        let mut connection = self.connection.clone();
        let reply: Vec<i64> = match tokio::time::timeout(self.options.response_timeout, invocation.invoke_async(&mut connection)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) if e.is_timeout() => return Err(Error::Timeout(self.options.response_timeout)),
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(Error::Timeout(self.options.response_timeout)),
        };
        outcome(&reply)
    }
}

/// Remembers a failure to reach Redis for a short interval, shared by every
/// clone of the backend.
#[derive(Debug)]
struct Breaker {
    origin: Instant,
    /// Microseconds since `origin` until which calls fail fast.
    open_until_us: AtomicU64,
    failure: Mutex<String>,
}

impl Breaker {
    fn new() -> Self {
        Breaker { origin: Instant::now(), open_until_us: AtomicU64::new(0), failure: Mutex::new(String::new()) }
    }

    fn elapsed_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// The failure that opened the breaker, while it is open.
    fn open(&self) -> Option<String> {
        if self.elapsed_us() < self.open_until_us.load(Ordering::Acquire) {
            Some(self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone())
        } else {
            None
        }
    }

    fn trip(&self, error: &Error, interval: Duration) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = error.to_string();
        self.open_until_us.store(self.elapsed_us() + interval.as_micros() as u64, Ordering::Release);
    }
}


fn outcome(reply: &[i64]) -> Result<Outcome, Error> {
    let &[allowed, limit, remaining, reset_after_us, retry_after_us, violated] = reply else {
        return Err(Error::Protocol(format!("expected 6 integers, got {reply:?}")));
    };
    let non_negative = |v: i64| u64::try_from(v).map_err(|_| Error::Protocol(format!("negative field in {reply:?}")));
    Ok(Outcome {
        allowed: allowed == 1,
        limit: non_negative(limit)?,
        remaining: non_negative(remaining)?,
        reset_after_us: non_negative(reset_after_us)?,
        retry_after_us: if retry_after_us < 0 { None } else { Some(retry_after_us as u64) },
        violated: violated as u32,
    })
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl Backend for RedisBackend {
    fn decide<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Outcome, Error>> {
        Box::pin(self.eval(request))
    }

    fn reset<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            redis::cmd("DEL").arg(key).exec_async(&mut connection).await?;
            Ok(())
        })
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend").field("options", &self.options).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords_in_messages() {
        assert_eq!(redact("redis://app:s3cret@localhost:6379/0"), "redis://app:***@localhost:6379/0");
        assert_eq!(redact("redis://localhost:6379"), "redis://localhost:6379");
    }

    #[test]
    fn rejects_malformed_replies() {
        assert!(outcome(&[1, 2, 3]).is_err());
        assert!(outcome(&[1, -2, 3, 4, -1, 0]).is_err());
        assert_eq!(outcome(&[0, 5, 0, 10, 7, 2]).unwrap().retry_after_us, Some(7));
    }
}
