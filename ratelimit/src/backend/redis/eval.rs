//! [`Eval`]: a bound limiter's script calls. One `EVALSHA` decides one call
//! or a batch of them, bounded by the response timeout, behind the breaker,
//! the script loaded again after `NOSCRIPT`. A family's first call loads
//! its script within that same bound: the load and the call share one deadline.
//! With [`RedisOptions::replica_acks`](crate::RedisOptions::replica_acks),
//! every script call is pipelined with `WAIT`, and answered only once
//! enough replicas have its writes (`send`, for single calls and batches alike).

use super::batches::batch_reply::{outcomes, replied_cost};
use super::batches::batched::{BatchFailure, Batched};
use super::connection::breaker::Breaker;
use super::connection::failure::from_redis;
use super::connection::options::RedisOptions;
use super::connection::request::Request;
use super::connection::{is_dead_socket, Connection};
use super::scripts::arguments::{arguments, words, Sent};
use super::scripts::family::Family;
use super::scripts::plan::Plan;
use super::scripts::registry::ScriptRegistry;
use crate::backend::{CallKind, Outcome};
use crate::error::{Error, Failure};
use redis::{Cmd, ErrorKind, Pipeline, ServerErrorKind, Value};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A backend's script calls: its connection, breaker and scripts.
pub(crate) struct Eval {
    pub(super) connection: Connection,
    pub(super) breaker: Arc<Breaker>,
    pub(super) response_timeout: Duration,
    pub(super) retry_interval: Duration,
    pub(super) registry: ScriptRegistry,
    pub(super) acks: Option<ReplicaAcks>,
}

/// How many replicas must have a script call's writes, and how long the
/// master waits for them (`WAIT`): [`RedisOptions::replica_acks`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplicaAcks {
    replicas: usize,
    timeout: Duration,
}

impl ReplicaAcks {
    /// The options' acknowledgements, or `None` when none is asked.
    pub(crate) fn of(options: &RedisOptions) -> Option<ReplicaAcks> {
        (options.replica_acks > 0)
            .then_some(ReplicaAcks { replicas: options.replica_acks, timeout: options.replica_ack_timeout })
    }

    /// `cmd` then `WAIT`, written together: one round trip, and `WAIT`
    /// covers the connection's last write, which is at least `cmd`'s.
    fn pipelined(&self, cmd: Cmd) -> Pipeline {
        let mut wait = redis::cmd("WAIT");
        // Validated: at least a millisecond (a zero would wait forever), far below `u64::MAX`.
        wait.arg(self.replicas).arg(self.timeout.as_millis() as u64);
        let mut pipeline = redis::pipe();
        pipeline.add_command(cmd).add_command(wait);
        pipeline
    }

    /// The script's reply, once `WAIT` says enough replicas have it. Fewer
    /// is an error, never an answer: the call counted on a master whose
    /// writes a failover may discard.
    fn acknowledged(&self, reply: Value) -> Result<Value, Error> {
        let malformed = || Error::Protocol("Redis answered a script call and its `WAIT` with something else".into());
        let Value::Array(mut replies) = reply else { return Err(malformed()) };
        let (Some(Value::Int(acked)), Some(reply), None) = (replies.pop(), replies.pop(), replies.pop()) else {
            return Err(malformed());
        };
        match usize::try_from(acked) {
            Ok(acked) if acked >= self.replicas => Ok(reply),
            _ => Err(Error::Server(Failure::new(format!(
                "the call ran on the Redis master, but {acked} of the {} replicas asked had its writes within {:?}: \
                 a failover now could lose it, so it was not answered (it may have been counted)",
                self.replicas, self.timeout
            )))),
        }
    }
}

impl Eval {
    /// Decides a call of `cost` on `storage_key` (a peek takes nothing, a
    /// refund gives back) under `plan`'s policy, at `now_us` or, with
    /// `None`, on Redis's own clock. A limiter bound for Redis's clock
    /// always sends `None`.
    pub(crate) async fn one(&self, plan: &Plan, storage_key: &[u8], call: Sent) -> Result<Outcome, Error> {
        let deadline = Instant::now() + self.response_timeout;
        self.load_once(plan.family, storage_key, deadline).await;
        let mut cmd = Cmd::with_capacity(9, 96 + storage_key.len() + plan.policy.len());
        cmd.arg("EVALSHA").arg(self.registry.script(plan.family).get_hash()).arg(1).arg(storage_key);
        arguments(&mut cmd, &plan.policy, call);
        // A peek writes nothing, so sending it twice cannot count it twice;
        // a refund sent twice would give back twice.
        let peek = call.kind == CallKind::Peek;
        let reply = self.send(cmd, storage_key, peek, deadline).await.map_err(|(error, _)| error)?;
        plan.reply.outcome(reply, replied_cost(call))
    }

    /// Decides `calls`, all of `family`, in one script call, one after
    /// another in their order: one result per call, each as the call alone
    /// would have got (a call that fails or replies malformed fails alone).
    /// `declare_all`: every key is declared (`lua/batch.lua`); else only
    /// the first, and every key travels in ARGV.
    pub(crate) async fn batch(
        &self,
        family: Family,
        calls: &[Batched],
        declare_all: bool,
    ) -> Result<Vec<Result<Outcome, Error>>, BatchFailure> {
        let Some((first, _)) = calls.split_first() else { return Ok(Vec::new()) };
        let deadline = Instant::now() + self.response_timeout;
        self.load_once(family, &first.key, deadline).await;
        // The policy goes once when every call shares it (the common batch).
        let shared = calls.iter().all(|c| c.plan.policy == first.plan.policy);
        let policies = if shared { &calls[..1] } else { calls };
        let words = words(calls.iter().map(|c| c.call));
        let bytes: usize = calls.iter().map(|c| c.key.len() + 16).sum::<usize>()
            + policies.iter().map(|c| c.plan.policy.len() + 16).sum::<usize>();
        let mut cmd = Cmd::with_capacity(6 + 2 * calls.len(), 96 + first.key.len() + words.len() + bytes);
        cmd.arg("EVALSHA").arg(self.registry.script(family).get_hash());
        if declare_all {
            cmd.arg(calls.len());
            for Batched { key, .. } in calls {
                cmd.arg(key);
            }
            cmd.arg(calls.len()).arg(&words);
        } else {
            // Redis routes and checks the batch by its first key; the script
            // reaches the others through ARGV.
            cmd.arg(1).arg(&first.key).arg(calls.len()).arg(&words);
            for Batched { key, .. } in calls {
                cmd.arg(key);
            }
        }
        for Batched { plan, .. } in policies {
            cmd.arg(&plan.policy);
        }
        let replayable = calls.iter().all(|c| c.call.kind == CallKind::Peek);
        let reply = match self.send(cmd, &first.key, replayable, deadline).await {
            Ok(reply) => reply,
            Err((_, true)) => return Err(BatchFailure::Misrouted),
            Err((error, false)) => return Err(BatchFailure::Failed(error)),
        };
        outcomes(calls, reply)
    }

    async fn load_once(&self, family: Family, key: &[u8], deadline: Instant) {
        if !self.registry.loaded(family).load(Ordering::Acquire) {
            // Boxed: only a first call waits for it.
            Box::pin(self.load_first(family, key, deadline)).await;
        }
    }

    /// Loads `family`'s script ahead of its first `EVALSHA` (on every master
    /// of a cluster), so that call does not reload every script of the
    /// backend; by the call's own `deadline`, which the call then has what
    /// is left of. While the breaker of `key`'s node is open the call fails at once instead,
    /// as every other does; should the load fail, the `EVALSHA`'s NOSCRIPT reloads.
    async fn load_first(&self, family: Family, key: &[u8], deadline: Instant) {
        if self.breaker.open(key).is_some() {
            return;
        }
        let mut connection = self.connection.clone();
        let invocation = self.registry.script(family).prepare_invoke();
        match tokio::time::timeout_at(deadline, invocation.load_async(&mut connection)).await {
            Ok(Ok(_)) => self.registry.loaded(family).store(true, Ordering::Release),
            _ => tracing::debug!(target: "redlimit", "could not load a limiter's script ahead of its first call"),
        }
    }

    /// Sends one `EVALSHA` (and its `WAIT`, when replicas must acknowledge
    /// it) by `deadline` (the response timeout from the
    /// call's start: a wait for a reconnect, the script's first load or a
    /// reload included), unless the breaker of `key`'s node is open. A deadline already
    /// passed (the first load took it all) sends nothing: a timeout.
    /// The error says too whether a cluster refused the call for its keys'
    /// slots (which opens no breaker: Redis is up).
    ///
    /// A timeout or a refused connect opens that breaker: the node is down or
    /// stuck. A socket that died does not: it says only that one connection
    /// was lost (closed while idle, reset), and the manager is already
    /// replacing it. Such a call fails alone when it may have run on Redis
    /// (see `connection.rs`: it is never resent unless `replayable`).
    async fn send(&self, cmd: Cmd, key: &[u8], replayable: bool, deadline: Instant) -> Result<Value, (Error, bool)> {
        if let Some(failing_fast) = self.breaker.open(key) {
            return Err((failing_fast, false));
        }
        let pipeline;
        let request = match &self.acks {
            None => Request::One(&cmd),
            Some(acks) => {
                pipeline = acks.pipelined(cmd);
                Request::Pipelined(&pipeline)
            }
        };
        let timed_out = || Error::Timeout(self.response_timeout);
        let sent = match Instant::now() < deadline {
            true => tokio::time::timeout_at(deadline, self.eval_reloading(request, key, replayable))
                .await
                .map_err(|_| timed_out()),
            false => Err(timed_out()),
        };
        let result = match sent {
            Ok(Ok(reply)) => {
                return match &self.acks {
                    None => Ok(reply),
                    Some(acks) => acks.acknowledged(reply).map_err(|error| (error, false)),
                }
            }
            Ok(Err(e)) if is_misrouted(&e) => return Err((from_redis(e), true)),
            Ok(Err(e)) if e.is_timeout() => (Error::Timeout(self.response_timeout), false),
            Ok(Err(e)) => {
                let dead_socket = is_dead_socket(&e);
                (from_redis(e), dead_socket)
            }
            Err(elapsed) => (elapsed, false),
        };
        let (error, dead_socket) = result;
        if error.is_unavailable() && !dead_socket {
            self.breaker.trip(key, &error, self.retry_interval);
        }
        Err((error, false))
    }

    /// Sends `cmd`; on `NOSCRIPT`, reloads every script of the backend
    /// (once, however many calls meet it at the same time) and sends it again.
    async fn eval_reloading(&self, cmd: Request<'_>, key: &[u8], replayable: bool) -> redis::RedisResult<Value> {
        let mut connection = self.connection.clone();
        let reloads_before = self.registry.reloads();
        match connection.request(cmd, key, replayable).await {
            // Boxed: rare, and its state would otherwise be in every call's future.
            Err(e) if is_no_script(&e) => {
                Box::pin(self.reload_and_retry(cmd, key, replayable, connection, reloads_before)).await
            }
            result => result,
        }
    }

    /// Reloads and sends `cmd` again; a few times, since Redis may lose its
    /// scripts again (another flush, a second failover) before the retry lands.
    async fn reload_and_retry(
        &self,
        cmd: Request<'_>,
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
            match connection.request(cmd, key, replayable).await {
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

/// A cluster's refusal of a batch whose keys its node does not all serve:
/// Redis's own before the script runs, or the script's (`NONLOCAL`,
/// lua/batch.lua) before it decides anything; so nothing was counted.
fn is_misrouted(error: &redis::RedisError) -> bool {
    error.code() == Some("NONLOCAL")
        || matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::CrossSlot)
        )
}

/// `future`, or [`Error::Timeout`] once `timeout` has passed.
pub(crate) async fn bounded<T>(timeout: Duration, future: impl Future<Output = T>) -> Result<T, Error> {
    tokio::time::timeout(timeout, future).await.map_err(|_| Error::Timeout(timeout))
}
