//! [`Eval`]: a bound limiter's script calls. One `EVALSHA` decides one call
//! or a batch of them, bounded by the response timeout, behind the breaker,
//! the script loaded again after `NOSCRIPT`.

use super::breaker::Breaker;
use super::connection::{is_dead_socket, Connection};
use super::failure::from_redis;
use super::scripts::{Family, Plan, Registry};
use crate::backend::{Call, CallKind, Outcome, PermitId, CLIENT_CLOCK_SLACK_US};
use crate::Error;
use redis::{Cmd, ErrorKind, ServerErrorKind, Value};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A backend's script calls: its connection, breaker and scripts.
pub(crate) struct Eval {
    pub(super) connection: Connection,
    pub(super) breaker: Arc<Breaker>,
    pub(super) response_timeout: Duration,
    pub(super) retry_interval: Duration,
    pub(super) registry: Registry,
}

/// One call of a batch: its storage key, the call, and its policy's plan.
pub(crate) struct Batched {
    pub(crate) key: Vec<u8>,
    pub(crate) call: Call,
    pub(crate) plan: Arc<Plan>,
}

/// How a batch failed as a whole.
pub(crate) enum BatchFailure {
    /// As each of its calls would have failed alone.
    Failed(Error),
    /// A cluster refused it before running it: its keys are not all served
    /// by the node it reached (the slots moved). Sent one by one, each call
    /// finds its own node.
    Misrouted,
}

impl Eval {
    /// Decides a call of `cost` on `storage_key` (a peek takes nothing, a
    /// refund gives back) under `plan`'s policy, at `now_us` or, with
    /// `None`, on Redis's own clock. A limiter bound for Redis's clock
    /// always sends `None`.
    pub(crate) async fn one(&self, plan: &Plan, storage_key: &[u8], call: Call) -> Result<Outcome, Error> {
        self.load_once(plan.family).await;
        let mut cmd = Cmd::with_capacity(9, 96 + storage_key.len() + plan.policy.len());
        cmd.arg("EVALSHA").arg(self.registry.script(plan.family).get_hash()).arg(1).arg(storage_key);
        arguments(&mut cmd, &plan.policy, call);
        // A peek writes nothing, so sending it twice cannot count it twice;
        // a refund sent twice would give back twice.
        let reply = self.send(&cmd, storage_key, call.kind == CallKind::Peek).await.map_err(|(error, _)| error)?;
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
        self.load_once(family).await;
        // The policy goes once when every call shares it (the common batch).
        let shared = calls.iter().all(|c| c.plan.policy == first.plan.policy);
        let policies = if shared { &calls[..1] } else { calls };
        let words = words(calls);
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
        let reply = match self.send(&cmd, &first.key, replayable).await {
            Ok(reply) => reply,
            Err((_, true)) => return Err(BatchFailure::Misrouted),
            Err((error, false)) => return Err(BatchFailure::Failed(error)),
        };
        match reply {
            Value::BulkString(joined) => Ok(split_joined(calls, &joined)?),
            Value::Array(replies) if replies.len() == calls.len() => Ok(replies
                .into_iter()
                .zip(calls)
                .map(|(reply, Batched { call, plan, .. })| match reply {
                    // This call's own failure (its key holds another type): its alone.
                    Value::Array(failed) if matches!(&failed[..], [Value::BulkString(_)]) => {
                        Err(call_failed(&failed[0]))
                    }
                    reply => plan.reply.outcome(reply, replied_cost(*call)),
                })
                .collect()),
            other => Err(BatchFailure::Failed(Error::Protocol(format!(
                "a batch of {} calls replied {other:?}: expected one reply per call",
                calls.len()
            )))),
        }
    }

    async fn load_once(&self, family: Family) {
        if !self.registry.loaded(family).load(Ordering::Acquire) {
            // Boxed: only a first call waits for it.
            Box::pin(self.load_first(family)).await;
        }
    }

    /// Loads `family`'s script ahead of its first `EVALSHA` (on every master
    /// of a cluster), so that call does not reload every script of the
    /// backend. While the breaker is open the call fails at once instead, as
    /// every other does; should the load fail, the `EVALSHA`'s NOSCRIPT reloads.
    async fn load_first(&self, family: Family) {
        if self.breaker.open().is_some() {
            return;
        }
        let mut connection = self.connection.clone();
        let invocation = self.registry.script(family).prepare_invoke();
        match tokio::time::timeout(self.response_timeout, invocation.load_async(&mut connection)).await {
            Ok(Ok(_)) => self.registry.loaded(family).store(true, Ordering::Release),
            _ => tracing::debug!(target: "redlimit", "could not load a limiter's script ahead of its first call"),
        }
    }

    /// Sends one `EVALSHA`, bounded by the response timeout (a wait for a
    /// reconnect or a script reload included), unless the breaker is open.
    /// The error says too whether a cluster refused the call for its keys'
    /// slots (which opens no breaker: Redis is up).
    ///
    /// A timeout or a refused connect opens the breaker: Redis is down or
    /// stuck. A socket that died does not: it says only that one connection
    /// was lost (closed while idle, reset), and the manager is already
    /// replacing it. Such a call fails alone when it may have run on Redis
    /// (see `connection.rs`: it is never resent unless `replayable`).
    async fn send(&self, cmd: &Cmd, key: &[u8], replayable: bool) -> Result<Value, (Error, bool)> {
        if let Some(failing_fast) = self.breaker.open() {
            return Err((failing_fast, false));
        }
        let result = match bounded(self.response_timeout, self.eval_reloading(cmd, key, replayable)).await {
            Ok(Ok(reply)) => return Ok(reply),
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
            self.breaker.trip(&error, self.retry_interval);
        }
        Err((error, false))
    }

    /// Sends `cmd`; on `NOSCRIPT`, reloads every script of the backend
    /// (once, however many calls meet it at the same time) and sends it again.
    async fn eval_reloading(&self, cmd: &Cmd, key: &[u8], replayable: bool) -> redis::RedisResult<Value> {
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
        cmd: &Cmd,
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

/// The outcomes of a batch whose replies came joined into one string
/// (`lua/batch.lua`), each call's the next bytes of its reply's width.
fn split_joined(calls: &[Batched], joined: &[u8]) -> Result<Vec<Result<Outcome, Error>>, BatchFailure> {
    let malformed = || {
        BatchFailure::Failed(Error::Protocol(format!(
            "a batch of {} calls replied {} joined bytes: not one reply per call",
            calls.len(),
            joined.len()
        )))
    };
    let mut at = 0;
    let mut outcomes = Vec::with_capacity(calls.len());
    for Batched { call, plan, .. } in calls {
        let width = plan.reply.joined_width().ok_or_else(malformed)?;
        let bytes = joined.get(at..at + width).ok_or_else(malformed)?;
        outcomes.push(plan.reply.joined_outcome(bytes, replied_cost(*call)));
        at += width;
    }
    if at != joined.len() {
        return Err(malformed());
    }
    Ok(outcomes)
}

/// The error of one call of a batch, as `lua/batch.lua` replies it (a
/// table of one string): an `Error::Server`, as the call alone would get.
fn call_failed(message: &Value) -> Error {
    let text = match message {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => format!("{other:?}"),
    };
    Error::Server(crate::error::Failure::new(format!("Redis answered with an error: {text}")))
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

/// The cost a reply is read for: a refund replies as a check of cost 0.
fn replied_cost(call: Call) -> u64 {
    match call.kind {
        CallKind::Refund => 0,
        _ => call.cost,
    }
}

/// The call's kind as the scripts read it (`lua/prelude.lua`), and the
/// permit a concurrency call is about (`lua/concurrency.lua`).
fn kind_number(kind: CallKind) -> (u8, Option<PermitId>) {
    match kind {
        CallKind::Check => (0, None),
        CallKind::Peek => (1, None),
        CallKind::Refund => (2, None),
        CallKind::Acquire(id) => (3, Some(id)),
        CallKind::Release(id) => (4, Some(id)),
        CallKind::Renew(id) => (5, Some(id)),
    }
}

/// A single call's kind as text: its digit, then its permit's id, if any.
struct KindText {
    bytes: [u8; 17],
    len: usize,
}

impl KindText {
    fn of(kind: CallKind) -> KindText {
        let (number, permit) = kind_number(kind);
        let mut bytes = [b'0' + number; 17];
        let len = match permit {
            Some(PermitId(id)) => {
                bytes[1..].copy_from_slice(&id);
                17
            }
            None => 1,
        };
        KindText { bytes, len }
    }
}

impl redis::ToRedisArgs for KindText {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        out.write_arg(&self.bytes[..self.len]);
    }
}

/// A single call's ARGV (`lua/batch.lua`): the policy, cost, kind, now
/// and slack as text, leaving out the trailing ones that are the common
/// call's (cost 1, a check, Redis's clock).
fn arguments(cmd: &mut Cmd, policy: &[u8], call: Call) {
    cmd.arg(policy);
    if let Some(now) = call.now_us {
        cmd.arg(call.cost)
            .arg(KindText::of(call.kind))
            .arg(crate::clock::bounded(now))
            .arg(CLIENT_CLOCK_SLACK_US / 1000);
    } else if call.kind != CallKind::Check {
        cmd.arg(call.cost).arg(KindText::of(call.kind));
    } else if call.cost != 1 {
        cmd.arg(call.cost);
    }
}

/// A batched call's word (`lua/batch.lua`): cost, kind, now (-1: Redis's
/// clock) and slack as four little-endian doubles, then, in a batch with a
/// permit call, 16 bytes: its permit's id, or zeros.
const WORD: usize = 32;
const PERMIT_WORD: usize = WORD + 16;

/// A batch's words (`lua/batch.lua`): none when every call is the common
/// call (cost 1, a check, Redis's clock), which the script then decides
/// without unpacking anything; else one word per call, all of one width.
fn words(calls: &[Batched]) -> Vec<u8> {
    let common = |c: &Call| c.cost == 1 && c.kind == CallKind::Check && c.now_us.is_none();
    if calls.iter().all(|b| common(&b.call)) {
        return Vec::new();
    }
    let width = if calls.iter().any(|b| kind_number(b.call.kind).1.is_some()) { PERMIT_WORD } else { WORD };
    let mut words = vec![0u8; width * calls.len()];
    for (word, Batched { call, .. }) in words.chunks_exact_mut(width).zip(calls) {
        let (now, slack) = match call.now_us {
            Some(now) => (crate::clock::bounded(now) as f64, (CLIENT_CLOCK_SLACK_US / 1000) as f64),
            None => (-1.0, 0.0),
        };
        let (kind, permit) = kind_number(call.kind);
        // A cost past 2^53 rounds as the script's own parsing of its text would.
        for (slot, v) in word.chunks_exact_mut(8).zip([call.cost as f64, f64::from(kind), now, slack]) {
            slot.copy_from_slice(&v.to_le_bytes());
        }
        if let Some(PermitId(id)) = permit {
            word[WORD..].copy_from_slice(&id);
        }
    }
    words
}

/// `future`, or [`Error::Timeout`] once `timeout` has passed.
pub(crate) async fn bounded<T>(timeout: Duration, future: impl Future<Output = T>) -> Result<T, Error> {
    tokio::time::timeout(timeout, future).await.map_err(|_| Error::Timeout(timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(write: fn(&mut Cmd, &[u8], Call), cost: u64, kind: CallKind, now_us: Option<u64>) -> Vec<Vec<u8>> {
        let mut cmd = Cmd::new();
        write(&mut cmd, b"P", Call { cost, kind, now_us });
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => unreachable!("no cursor"),
            })
            .collect()
    }

    #[test]
    fn a_bound_limiter_can_be_shared_between_tasks() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<Eval>();
    }

    #[test]
    fn a_call_sends_only_the_argv_that_differ_from_the_common_call() {
        use CallKind::*;
        assert_eq!(sent(arguments, 1, Check, None), [b"P".to_vec()], "the policy always");
        assert_eq!(sent(arguments, 3, Check, None), [b"P".to_vec(), b"3".to_vec()]);
        assert_eq!(sent(arguments, 1, Peek, None), [&b"P"[..], b"1", b"1"].map(<[u8]>::to_vec));
        assert_eq!(sent(arguments, 1, Refund, None), [&b"P"[..], b"1", b"2"].map(<[u8]>::to_vec));
        assert_eq!(sent(arguments, 2, Check, Some(7)), [&b"P"[..], b"2", b"0", b"7", b"60000"].map(<[u8]>::to_vec));
    }

    fn batched(calls: &[(u64, CallKind, Option<u64>)]) -> Vec<Batched> {
        let plan = Arc::new(super::super::scripts::plan(&crate::Policy::gcra("1/1s", 1).unwrap(), true));
        calls
            .iter()
            .map(|&(cost, kind, now_us)| Batched {
                key: b"k".to_vec(),
                call: Call { cost, kind, now_us },
                plan: plan.clone(),
            })
            .collect()
    }

    fn word(values: [f64; 4]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn a_batch_of_common_calls_sends_no_words_else_one_per_call() {
        use CallKind::*;
        assert_eq!(words(&batched(&[(1, Check, None), (1, Check, None)])), Vec::<u8>::new());
        let mixed = batched(&[(1, Check, None), (5, Peek, Some(9)), (3, Refund, None), (2, Check, None)]);
        let expected = [
            word([1.0, 0.0, -1.0, 0.0]),
            word([5.0, 1.0, 9.0, 60.0 * 1000.0]),
            word([3.0, 2.0, -1.0, 0.0]),
            word([2.0, 0.0, -1.0, 0.0]),
        ];
        assert_eq!(words(&mixed), expected.concat());
    }

    #[test]
    fn joined_replies_are_split_by_each_calls_width() {
        use CallKind::*;
        let calls = batched(&[(1, Check, None), (2, Check, None)]);
        // gcra 1/1s, burst 1: one emission is 1 000 000 units, the tolerance 2 000 000.
        let reply = |v: f64, now: f64| [v.to_le_bytes(), now.to_le_bytes()].concat();
        let joined = [reply(1e6, 7.0), reply(-1.0 - 1e6, 7.0)].concat();
        let outcomes = split_joined(&calls, &joined).ok().unwrap();
        assert!(outcomes[0].as_ref().unwrap().allowed && !outcomes[1].as_ref().unwrap().allowed);
        assert!(split_joined(&calls, &joined[..24]).is_err(), "short");
        assert!(split_joined(&calls, &[joined.clone(), reply(0.0, 7.0)].concat()).is_err(), "long");
    }

    #[test]
    fn a_permit_call_carries_its_id_after_its_kind() {
        let id = PermitId([7; 16]);
        let text = |digit: u8| [&[digit][..], &id.0].concat();
        assert_eq!(sent(arguments, 1, CallKind::Acquire(id), None), [b"P".to_vec(), b"1".to_vec(), text(b'3')]);
        assert_eq!(sent(arguments, 2, CallKind::Release(id), None), [b"P".to_vec(), b"2".to_vec(), text(b'4')]);
        let calls = batched(&[(1, CallKind::Renew(id), None), (1, CallKind::Peek, None)]);
        let expected = [word([1.0, 5.0, -1.0, 0.0]), id.0.to_vec(), word([1.0, 1.0, -1.0, 0.0]), vec![0; 16]];
        assert_eq!(words(&calls), expected.concat(), "every word as wide as a permit's");
    }
}
