//! [`RedisBackend`]: one multiplexed, auto-reconnecting connection and the scripts.

use super::breaker::Breaker;
use super::connection::Connection;
use super::endpoint::{self, redact};
use super::fixed_window_counter::Counter;
use super::watchdog::Watchdog;
use super::{Answer, Backend, Binding, Bound, BoxFuture, Call, Outcome, Request, CLIENT_CLOCK_SLACK_US};
use crate::policy::Params;
use crate::policy_scripts::{self, PolicyScriptKey};
use crate::reused::Reused;
use crate::{scripts, Error};
use redis::{ErrorKind, ServerErrorKind};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Timeouts and retry settings of the Redis connection. Every default is set
/// here explicitly rather than inherited from redis-rs.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Bound on establishing a connection (default 1 s). Start-up fails with a
    /// clear error after this, instead of hanging.
    pub connect_timeout: Duration,
    /// Bound on one decision's round trip (default 250 ms). A call that takes
    /// longer is an [`Error::Timeout`]; it may still have run on the server, so
    /// it is never counted as a permit. One watchdog per connection keeps
    /// this bound for every call in flight, on a clock that ticks ten times
    /// per timeout: a call fails at most a tenth of the timeout after it.
    pub response_timeout: Duration,
    /// Reconnect attempts after the connection drops (default 3, backing off from 50 ms).
    pub reconnect_retries: usize,
    /// After a failure to reach Redis, calls fail at once with
    /// [`Error::Unavailable`] for this long (default 250 ms) instead of each
    /// waiting out a timeout; then the next call tries Redis again.
    pub retry_interval: Duration,
    /// PEM certificate(s) of a private certificate authority to trust for
    /// the Redis nodes of `rediss://`, `rediss+cluster://` and
    /// `rediss+sentinel://` (default: none, the system's roots). Sentinels
    /// themselves are reached over plain TCP.
    #[cfg(feature = "tls")]
    pub tls_root_cert: Option<Vec<u8>>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_millis(250),
            reconnect_retries: 3,
            retry_interval: Duration::from_millis(250),
            #[cfg(feature = "tls")]
            tls_root_cert: None,
        }
    }
}

/// Decides on Redis: one `EVALSHA` of the policy's algorithm script per
/// decision, whatever the number of strategies.
///
/// One multiplexed, reconnecting connection (redis-rs's `ConnectionManager`,
/// its cluster connection, or a Sentinel-resolved master) serves every
/// limiter and task; scripts are loaded once at start-up (on every node) and
/// again, all of them and once, when Redis answers `NOSCRIPT` (after a
/// restart, failover, resharding to a new node or `SCRIPT FLUSH`): the
/// calls that meet it meanwhile wait for that one reload and try again,
/// instead of each sending its own `SCRIPT LOAD`.
#[derive(Clone)]
pub struct RedisBackend {
    connection: Connection,
    options: RedisOptions,
    breaker: Arc<Breaker>,
    scripts: Arc<ScriptReload>,
    /// Bounds every request by the response timeout.
    watchdog: Arc<Watchdog>,
}

/// One reload of every script at a time, however many calls meet `NOSCRIPT`.
#[derive(Default)]
struct ScriptReload {
    /// How many reloads have finished: a call that sent its `EVALSHA` before
    /// the latest one started does not reload again.
    done: AtomicU64,
    running: tokio::sync::Mutex<()>,
}

impl RedisBackend {
    /// Connects to `url` (any form [`Store::redis`](crate::Store::redis)
    /// documents) and loads every script.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<RedisBackend, Error> {
        let endpoint = endpoint::parse(url)?;
        // redis-rs retries a failed first connect; bound the whole start-up.
        let bound = options.connect_timeout * (options.reconnect_retries as u32 + 2);
        // Boxed: the connect future is deep, and callers await it inline.
        let connect = Box::pin(Connection::connect(endpoint, &options));
        let connection = match tokio::time::timeout(bound, connect).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(e)) => return Err(Error::InvalidConfig(format!("cannot connect to Redis at {}: {e}", redact(url)))),
            Err(_) => {
                return Err(Error::InvalidConfig(format!(
                    "cannot connect to Redis at {}: no answer within {bound:?}",
                    redact(url)
                )))
            }
        };
        let watchdog = Arc::new(Watchdog::new(options.response_timeout));
        Ok(RedisBackend { connection, options, breaker: Arc::new(Breaker::new()), scripts: Arc::default(), watchdog })
    }

    /// Whether this backend talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.connection, Connection::Cluster(_))
    }

    /// A token bucket, leaky bucket or gcra: the policy's own script, the
    /// ARGV its prelude reads and 16 bytes back (`policy_reply`).
    async fn by_policy_script(&self, key: PolicyScriptKey, request: Request<'_>) -> Result<Outcome, Error> {
        let (script, made) = request.policy.script.get_or_make(key, || policy_scripts::bucket_source(key));
        if made {
            self.load_first(script).await;
        }
        let reply: Vec<u8> = self.send(&policy_invocation(script, &request)).await?;
        super::policy_reply::outcome(key, &reply, request.cost)
    }

    /// A window algorithm: its algorithm's script, with the policy as ARGV.
    async fn by_window_script(&self, request: Request<'_>) -> Result<Outcome, Error> {
        let script = match &request.policy.params {
            // Many sub-windows: the layout whose cost does not grow with them.
            Params::SlidingWindow { strategies, precision_us }
                if widest_span(strategies, *precision_us) >= scripts::TOTALS_FROM_SUB_WINDOWS =>
            {
                scripts::sliding_window_totals()
            }
            _ => scripts::script(request.policy.algorithm()),
        };
        // Sized once for EVALSHA, the hash, 1, the key, 4 fixed ARGV and the
        // parameters (at most 2 + 2 per strategy), each number under 20 digits.
        let arguments = 8 + 2 + 2 * request.policy.strategies().len();
        let mut invocation =
            Reused::take_or(|| redis::Cmd::with_capacity(arguments, 64 + request.key.len() + 20 * arguments));
        invocation.arg("EVALSHA").arg(script.get_hash()).arg(1).arg(request.key);
        // ARGV: now ("" = server TIME), cost, peek, TTL slack, then parameters.
        match request.now_us {
            Some(now) => {
                invocation.arg(now).arg(request.cost).arg(u8::from(request.peek)).arg(CLIENT_CLOCK_SLACK_US / 1000)
            }
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
            Params::TokenBucket { .. } | Params::LeakyBucket { .. } | Params::Gcra { .. } => {
                unreachable!("decided by their policy's own script")
            }
        }
        let reply: Vec<i64> = self.send(&invocation).await?;
        // Window scripts append a (remaining, reset) pair per strategy when there are several.
        let strategies = request.policy.strategies().len();
        outcome(&reply, if strategies > 1 { strategies } else { 0 })
    }

    /// A fixed window of one strategy on the server's clock: the policy's
    /// counter script, two ARGV at most and one integer back.
    async fn count_by_ttl(&self, counter: Counter, request: Request<'_>) -> Result<Outcome, Error> {
        let (script, made) = counter.script(&request.policy.script);
        if made {
            self.load_first(script).await;
        }
        let reply: i64 = self.send(&policy_invocation(script, &request)).await?;
        // The script reads no clock: the decision is dated by this process's
        // (the clock the deny cache dates it by, and a third of the cost of
        // reading the system's).
        counter.outcome(reply, request.cost, crate::clock::process_now_us())
    }

    /// Loads a script made per policy ahead of its first `EVALSHA` (on
    /// every node of a cluster), unless the breaker is open; should that
    /// fail or be skipped, the `EVALSHA` meets NOSCRIPT and reloads.
    /// Boxed: a policy's first call alone waits for it, and every
    /// decision's future would otherwise carry its state.
    fn load_first<'s>(&'s self, script: &'s redis::Script) -> BoxFuture<'s, ()> {
        Box::pin(self.load(script))
    }

    async fn load(&self, script: &redis::Script) {
        // While the breaker is open the call fails at once, as every other
        // does, rather than wait out the response timeout here; the
        // `EVALSHA`'s NOSCRIPT reload loads the script once Redis answers.
        if self.breaker.open().is_some() {
            return;
        }
        let mut connection = self.connection.clone();
        let invocation = script.prepare_invoke();
        let load = invocation.load_async(&mut connection);
        if !matches!(self.watchdog.bound(load).await, Ok(Ok(_))) {
            tracing::debug!(target: "ratelimit", "could not load a policy's script ahead of its first call");
        }
    }

    /// Sends one `EVALSHA`, bounded by the response timeout (a wait for a
    /// reconnect or a script reload included), unless the breaker is open;
    /// a failure to reach Redis opens it.
    async fn send<T: redis::FromRedisValue>(&self, invocation: &redis::Cmd) -> Result<T, Error> {
        if let Some(failure) = self.breaker.open() {
            return Err(Error::Unavailable(failure));
        }
        let result = match self.watchdog.bound(self.eval_reloading(invocation)).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) if e.is_timeout() => Err(Error::Timeout(self.options.response_timeout)),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(Error::Timeout(self.options.response_timeout)),
        };
        if let Err(error) = &result {
            if error.is_unavailable() {
                self.breaker.trip(error, self.options.retry_interval);
            }
        }
        result
    }
}

impl RedisBackend {
    /// Sends `evalsha`; on `NOSCRIPT`, reloads every script (once, however
    /// many calls meet it at the same time) and sends it again.
    async fn eval_reloading<T: redis::FromRedisValue>(&self, evalsha: &redis::Cmd) -> redis::RedisResult<T> {
        let mut connection = self.connection.clone();
        let reloads_before = self.scripts.done.load(Ordering::Acquire);
        match evalsha.query_async(&mut connection).await {
            // Boxed: rare, and its state would otherwise be in every call's future.
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                Box::pin(self.reload_and_retry(evalsha, connection, reloads_before)).await
            }
            result => result,
        }
    }

    /// Reloads every script, unless another call did since `reloads_before`,
    /// then sends `evalsha` again.
    async fn reload_and_retry<T: redis::FromRedisValue>(
        &self,
        evalsha: &redis::Cmd,
        mut connection: Connection,
        reloads_before: u64,
    ) -> redis::RedisResult<T> {
        let running = self.scripts.running.lock().await;
        if self.scripts.done.load(Ordering::Acquire) == reloads_before {
            tracing::info!(target: "ratelimit", "Redis lost the rate limit scripts (restart, failover or SCRIPT FLUSH); loading them again");
            super::connection::load_scripts(&mut connection).await?;
            self.scripts.done.fetch_add(1, Ordering::Release);
        }
        drop(running);
        evalsha.query_async(&mut connection).await
    }
}

/// `EVALSHA` of a script made per policy, with the optional ARGV its
/// prelude reads (`policy_scripts::arguments`).
fn policy_invocation(script: &redis::Script, request: &Request<'_>) -> Reused<redis::Cmd> {
    let mut invocation = Reused::take_or(|| redis::Cmd::with_capacity(8, 128 + request.key.len()));
    invocation.arg("EVALSHA").arg(script.get_hash()).arg(1).arg(request.key);
    policy_scripts::arguments(&mut invocation, request);
    invocation
}

/// Sub-windows in the widest window of a sliding window policy.
fn widest_span(strategies: &[crate::Strategy], precision_us: u64) -> u64 {
    strategies.iter().map(|s| s.window_us / precision_us).max().unwrap_or(0)
}

/// Reads a script's reply: 7 integers, then `quotas` pairs.
fn outcome(reply: &[i64], quotas: usize) -> Result<Outcome, Error> {
    let Some((&[allowed, limit, remaining, reset_after_us, retry_after_us, violated, now_us], pairs)) =
        reply.split_first_chunk::<7>().filter(|(_, rest)| rest.len() == 2 * quotas)
    else {
        return Err(Error::Protocol(format!("expected {} integers, got {reply:?}", 7 + 2 * quotas)));
    };
    let non_negative = |v: i64| u64::try_from(v).map_err(|_| Error::Protocol(format!("negative field in {reply:?}")));
    let quotas = pairs
        .chunks_exact(2)
        .map(|pair| Ok((non_negative(pair[0])?, non_negative(pair[1])?)))
        .collect::<Result<_, Error>>()?;
    Ok(Outcome {
        allowed: allowed == 1,
        limit: non_negative(limit)?,
        remaining: non_negative(remaining)?,
        reset_after_us: non_negative(reset_after_us)?,
        retry_after_us: if retry_after_us < 0 { None } else { Some(retry_after_us as u64) },
        violated: violated as u32,
        now_us: non_negative(now_us)?,
        quotas,
    })
}

impl Backend for RedisBackend {
    fn bind(&self, limiter: Binding<'_>) -> Arc<dyn Bound> {
        let prefix = crate::key::key_prefix(limiter.prefix, limiter.policy, limiter.name, limiter.server_clock);
        Arc::new(TemporaryBound { backend: self.clone(), policy: limiter.policy.clone(), prefix })
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

/// TEMPORARY until the Redis side binds once.
struct TemporaryBound {
    backend: RedisBackend,
    policy: crate::Policy,
    prefix: Vec<u8>,
}

impl Bound for TemporaryBound {
    fn decide<'a>(&'a self, key: &[u8], call: Call) -> Answer<'a> {
        let key = crate::key::storage_key(&self.prefix, key).to_vec();
        Answer::Later(Box::pin(async move {
            let request =
                Request { key: &key, policy: &self.policy, cost: call.cost, now_us: call.now_us, peek: call.peek };
            self.backend.decide(request).await
        }))
    }

    fn reset<'a>(&'a self, key: &[u8]) -> BoxFuture<'a, Result<(), Error>> {
        let key = crate::key::storage_key(&self.prefix, key).to_vec();
        Box::pin(async move { self.backend.reset(&key).await })
    }

    fn remote(&self) -> bool {
        true
    }
}

impl RedisBackend {
    /// One boxed future per decision, of the path the policy takes (no
    /// future of a dispatcher around it, to be moved and polled on every
    /// call). Each path sends one `EVALSHA` through [`send`](Self::send),
    /// which keeps the breaker.
    fn decide<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Outcome, Error>> {
        if request.now_us.is_none() {
            if let Some(counter) = Counter::of(request.policy) {
                return Box::pin(self.count_by_ttl(counter, request));
            }
        }
        match policy_scripts::bucket_key(request.policy) {
            Some(key) => Box::pin(self.by_policy_script(key, request)),
            None => Box::pin(self.by_window_script(request)),
        }
    }

    fn reset<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            // Bounded here: the connection itself has no response timeout.
            match self.watchdog.bound(redis::cmd("DEL").arg(key).exec_async(&mut connection)).await {
                Ok(result) => Ok(result?),
                Err(_) => Err(Error::Timeout(self.options.response_timeout)),
            }
        })
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
    fn rejects_malformed_replies() {
        assert!(outcome(&[1, 2, 3], 0).is_err());
        assert!(outcome(&[1, -2, 3, 4, -1, 0, 9], 0).is_err());
        assert_eq!(outcome(&[0, 5, 0, 10, 7, 2, 9], 0).unwrap().retry_after_us, Some(7));
        // Quota pairs: exactly as many as strategies, none negative.
        assert!(outcome(&[0, 5, 0, 10, 7, 2, 9], 2).is_err());
        assert!(outcome(&[0, 5, 0, 10, 7, 2, 9, 1, 2], 2).is_err());
        assert!(outcome(&[0, 5, 0, 10, 7, 2, 9, 1, 2, -3, 4], 2).is_err());
        assert_eq!(outcome(&[0, 5, 0, 10, 7, 2, 9, 1, 2, 3, 4], 2).unwrap().quotas, [(1, 2), (3, 4)]);
    }
}
