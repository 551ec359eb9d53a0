//! [`RedisBound`]: one limiter bound to a Redis backend, deciding its keys.

use super::breaker::Breaker;
use super::connection::{is_dead_socket, Connection};
use super::failure::from_redis;
use super::reply::Reply;
use super::scripts::Registry;
use crate::backend::{Answer, Bound, BoxFuture, Call, Outcome, CLIENT_CLOCK_SLACK_US};
use crate::Error;
use redis::{Cmd, ErrorKind, ServerErrorKind, Value};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A limiter's prefix and policy bound to a Redis backend: its script
/// (made, registered and hashed once), the decoder of that script's reply
/// and the prefix of its keys, with clones of the backend's connection and
/// breaker. Every call is one `EVALSHA` with the call's own ARGV.
///
/// The script's constants are written into it, and a call's ARGV are the
/// call alone (`lua/prelude.lua`): several waiting calls of one limiter
/// could be sent as one script call, with a key and four ARGV each, without
/// changing what is bound here.
pub(crate) struct RedisBound {
    pub(super) connection: Connection,
    pub(super) breaker: Arc<Breaker>,
    pub(super) response_timeout: Duration,
    pub(super) retry_interval: Duration,
    pub(super) registry: Arc<Registry>,
    pub(super) script: Arc<redis::Script>,
    pub(super) reply: Reply,
    pub(super) key_prefix: Vec<u8>,
    /// The script was loaded for this bound's first call.
    pub(super) loaded: AtomicBool,
}

impl Bound for RedisBound {
    fn decide<'a>(&'a self, key: &[u8], call: Call) -> Answer<'a> {
        // The full key is built here, so the round trip does not borrow the caller's.
        let storage_key = crate::key::storage_key(&self.key_prefix, key);
        Answer::Later(Box::pin(async move { self.decide_key(&storage_key, call.cost, call.peek, call.now_us).await }))
    }

    fn reset<'a>(&'a self, key: &[u8]) -> BoxFuture<'a, Result<(), Error>> {
        let storage_key = crate::key::storage_key(&self.key_prefix, key);
        Box::pin(async move { delete(&self.connection, self.response_timeout, &storage_key).await })
    }

    fn remote(&self) -> bool {
        true
    }
}

impl RedisBound {
    /// Decides a call of `cost` on `storage_key` (a peek takes nothing), at
    /// `now_us` or, with `None`, on Redis's own clock. A limiter bound for
    /// Redis's clock always sends `None`.
    async fn decide_key(
        &self,
        storage_key: &[u8],
        cost: u64,
        peek: bool,
        now_us: Option<u64>,
    ) -> Result<Outcome, Error> {
        if !self.loaded.load(Ordering::Acquire) {
            // Boxed: only a first call waits for it.
            Box::pin(self.load_first()).await;
        }
        let mut call = Cmd::with_capacity(8, 96 + storage_key.len());
        call.arg("EVALSHA").arg(self.script.get_hash()).arg(1).arg(storage_key);
        arguments(&mut call, cost, peek, now_us);
        // A peek writes nothing, so sending it twice cannot count it twice.
        let reply = self.send(&call, storage_key, peek).await?;
        self.reply.outcome(reply, cost)
    }

    /// Loads the script ahead of its first `EVALSHA` (on every master of a
    /// cluster), so that call does not reload every script of the backend.
    /// While the breaker is open the call fails at once instead, as every
    /// other does; should the load fail, the `EVALSHA`'s NOSCRIPT reloads.
    async fn load_first(&self) {
        if self.breaker.open().is_some() {
            return;
        }
        let mut connection = self.connection.clone();
        let invocation = self.script.prepare_invoke();
        match tokio::time::timeout(self.response_timeout, invocation.load_async(&mut connection)).await {
            Ok(Ok(_)) => self.loaded.store(true, Ordering::Release),
            _ => tracing::debug!(target: "redlimit", "could not load a limiter's script ahead of its first call"),
        }
    }

    /// Sends one `EVALSHA`, bounded by the response timeout (a wait for a
    /// reconnect or a script reload included), unless the breaker is open.
    ///
    /// A timeout or a refused connect opens the breaker: Redis is down or
    /// stuck. A socket that died does not: it says only that one connection
    /// was lost (closed while idle, reset), and the manager is already
    /// replacing it. Such a call fails alone when it may have run on Redis
    /// (see `connection.rs`: it is never resent unless `replayable`).
    async fn send(&self, call: &Cmd, key: &[u8], replayable: bool) -> Result<Value, Error> {
        if let Some(failing_fast) = self.breaker.open() {
            return Err(failing_fast);
        }
        let result = match bounded(self.response_timeout, self.eval_reloading(call, key, replayable)).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) if e.is_timeout() => Err((Error::Timeout(self.response_timeout), false)),
            Ok(Err(e)) => {
                let dead_socket = is_dead_socket(&e);
                Err((from_redis(e), dead_socket))
            }
            Err(elapsed) => Err((elapsed, false)),
        };
        result.map_err(|(error, dead_socket)| {
            if error.is_unavailable() && !dead_socket {
                self.breaker.trip(&error, self.retry_interval);
            }
            error
        })
    }

    /// Sends `call`; on `NOSCRIPT`, reloads every script of the backend
    /// (once, however many calls meet it at the same time) and sends it again.
    async fn eval_reloading(&self, call: &Cmd, key: &[u8], replayable: bool) -> redis::RedisResult<Value> {
        let mut connection = self.connection.clone();
        let reloads_before = self.registry.reloads();
        match connection.request(call, key, replayable).await {
            // Boxed: rare, and its state would otherwise be in every call's future.
            Err(e) if is_no_script(&e) => {
                Box::pin(self.reload_and_retry(call, key, replayable, connection, reloads_before)).await
            }
            result => result,
        }
    }

    /// Reloads and sends `call` again; a few times, since Redis may lose its
    /// scripts again (another flush, a second failover) before the retry lands.
    async fn reload_and_retry(
        &self,
        call: &Cmd,
        key: &[u8],
        replayable: bool,
        mut connection: Connection,
        mut reloads_before: u64,
    ) -> redis::RedisResult<Value> {
        let mut attempts = 1;
        loop {
            self.registry.reload(&mut connection, reloads_before).await?;
            reloads_before = self.registry.reloads();
            // NOSCRIPT is a refusal: the script did not run, so sending it again counts it once.
            match connection.request(call, key, replayable).await {
                Err(e) if is_no_script(&e) && attempts < RELOAD_ATTEMPTS => attempts += 1,
                result => return result,
            }
        }
    }
}

/// How many times one call reloads the scripts before it gives up on `NOSCRIPT`.
const RELOAD_ATTEMPTS: u32 = 3;

fn is_no_script(error: &redis::RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// The call's ARGV (`lua/prelude.lua`): cost, peek, now and slack, leaving
/// out the trailing ones that are the common call's (cost 1, a check,
/// Redis's clock).
fn arguments(call: &mut Cmd, cost: u64, peek: bool, now_us: Option<u64>) {
    match now_us {
        Some(now) => {
            call.arg(cost).arg(u8::from(peek)).arg(crate::clock::bounded(now)).arg(CLIENT_CLOCK_SLACK_US / 1000);
        }
        None if peek => {
            call.arg(cost).arg(1);
        }
        None if cost != 1 => {
            call.arg(cost);
        }
        None => {}
    }
}

/// `future`, or [`Error::Timeout`] once `timeout` has passed.
async fn bounded<T>(timeout: Duration, future: impl Future<Output = T>) -> Result<T, Error> {
    tokio::time::timeout(timeout, future).await.map_err(|_| Error::Timeout(timeout))
}

/// Deletes `key`, bounded by the response timeout (the connection itself has none).
async fn delete(connection: &Connection, timeout: Duration, key: &[u8]) -> Result<(), Error> {
    let mut connection = connection.clone();
    bounded(timeout, redis::cmd("DEL").arg(key).exec_async(&mut connection)).await?.map_err(from_redis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(cost: u64, peek: bool, now_us: Option<u64>) -> Vec<Vec<u8>> {
        let mut call = Cmd::new();
        arguments(&mut call, cost, peek, now_us);
        call.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => unreachable!("no cursor"),
            })
            .collect()
    }

    #[test]
    fn a_bound_limiter_can_be_shared_between_tasks() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<RedisBound>();
    }

    #[test]
    fn a_call_sends_only_the_argv_that_differ_from_the_common_call() {
        assert!(sent(1, false, None).is_empty());
        assert_eq!(sent(3, false, None), [b"3".to_vec()]);
        assert_eq!(sent(1, true, None), [b"1".to_vec(), b"1".to_vec()]);
        assert_eq!(sent(2, false, Some(7)), [&b"2"[..], b"0", b"7", b"60000"].map(<[u8]>::to_vec));
    }
}
