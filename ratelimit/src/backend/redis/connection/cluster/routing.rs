//! Sending a request to the node that serves it: by its key's slot as the
//! slot map says; again to the node a `MOVED` names (the map is learnt
//! again); once to the node an `ASK` names, after `ASKING`; again after a
//! short wait on `CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN` or `LOADING` (a
//! failover or a resharding under way). Redis refuses each of these
//! without running the request, so a resend counts it once. `PING` and
//! `SCRIPT LOAD` go to every master, and one master's answer is enough.

use super::super::request::Request;
use super::nodes::{no_answer, Awaited, Node};
use super::Cluster;
use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, Pipeline, RedisError, RedisResult, ServerErrorKind, Value};
use std::sync::Arc;
use std::time::Duration;

/// The most `MOVED` one request follows: a slot moves once in a resharding
/// step, so more says the nodes disagree, and the request fails.
const MOST_MOVES: usize = 3;

/// The first wait before a refused request is sent again, doubled each
/// time up to the last: a failover takes the cluster down for about its
/// node timeout. The caller's response timeout ends the waits sooner.
const FIRST_WAIT: Duration = Duration::from_millis(20);
const LONGEST_WAIT: Duration = Duration::from_millis(500);
const MOST_WAITS: usize = 30;

/// How long a request to every master waits for the others once one has
/// answered: a master that is slower than that gets the command all the
/// same (its part runs on in the background), only not waited for.
const OTHERS_WAITED: Duration = Duration::from_millis(100);

impl Cluster {
    /// `cmd` on the master of `key`'s slot, following `MOVED` and `ASK`.
    pub(crate) async fn request(
        self: &Arc<Cluster>,
        cmd: Request<'_>,
        key: &[u8],
        replayable: bool,
    ) -> RedisResult<Value> {
        let (mut moves, mut waits, mut wait) = (0, 0, FIRST_WAIT);
        loop {
            // A slot no node is known to serve goes to any: it answers MOVED.
            let index = self.owners.owner(key).unwrap_or(0);
            let Some(node) = self.nodes.get(&self.owners, index) else {
                return Err(RedisError::from((ErrorKind::ClusterConnectionNotFound, "no Redis Cluster node known")));
            };
            let reply = awaited(&node, cmd, replayable).await.and_then(Value::extract_error);
            let Err(error) = &reply else { return reply };
            // A node that has not learnt its own address names it by its port alone.
            let redirect = redirect(error).map(|(kind, slot, to)| match to.starts_with(':') {
                true => (kind, slot, format!("{}{to}", node.host())),
                false => (kind, slot, to),
            });
            match redirect {
                Some((Redirect::Moved, slot, to)) if moves < MOST_MOVES => {
                    moves += 1;
                    self.refresh_later();
                    if self.owners.moved(slot, &to).is_none() {
                        return reply;
                    }
                }
                Some((Redirect::Ask, _, to)) => {
                    let Some(asked) = self.owners.index_of(&to).and_then(|i| self.nodes.get(&self.owners, i)) else {
                        return reply;
                    };
                    return awaited(&asked, Request::Pipelined(&asking(cmd)), replayable)
                        .await
                        .and_then(Value::extract_error)
                        .map(|reply| without_asking(reply, matches!(cmd, Request::One(_))));
                }
                None if is_refused_for_now(error) && waits < MOST_WAITS => {
                    waits += 1;
                    self.refresh_later();
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(LONGEST_WAIT);
                }
                _ => {
                    if node.is_stalled() {
                        // Unreachable: it may have been failed over.
                        self.refresh_later();
                    }
                    return reply;
                }
            }
        }
    }

    /// What `ConnectionLike` sends (`SCRIPT LOAD`, `DEL`, `PING`): by its
    /// key, or to every master.
    pub(crate) async fn command(self: &Arc<Cluster>, cmd: &Cmd) -> RedisResult<Value> {
        match routing_of(cmd) {
            Routing::EveryMaster => self.every_master(cmd).await,
            Routing::Key { key, replayable } => self.request(Request::One(cmd), key, replayable).await,
        }
    }

    /// A pipeline, on the master of its first command's key as the slot map
    /// says (nothing this crate sends: decisions go through `request`).
    pub(crate) async fn pipeline(&self, pipeline: &Pipeline, offset: usize, count: usize) -> RedisResult<Vec<Value>> {
        let key = pipeline.cmd_iter().next().and_then(|cmd| {
            cmd.args_iter().nth(1).and_then(|arg| match arg {
                Arg::Simple(bytes) => Some(bytes.to_vec()),
                _ => None,
            })
        });
        let index = self.owners.owner(&key.unwrap_or_default()).unwrap_or(0);
        let Some(node) = self.nodes.get(&self.owners, index) else {
            return Err(RedisError::from((ErrorKind::ClusterConnectionNotFound, "no Redis Cluster node known")));
        };
        node.manager().await?.req_packed_commands(pipeline, offset, count).await
    }

    /// `cmd` on every master at once. The first answer is waited for, the
    /// others for [`OTHERS_WAITED`] more; a stalled master's not at all.
    /// Each part is bounded by the response timeout and runs to its end
    /// even when no longer waited for. Any master's success is the
    /// answer; a script a master missed is loaded on its `NOSCRIPT`.
    async fn every_master(&self, cmd: &Cmd) -> RedisResult<Value> {
        let masters: Vec<Arc<Node>> =
            self.owners.masters().into_iter().filter_map(|index| self.nodes.get(&self.owners, index)).collect();
        let every_one_stalled = masters.iter().all(|node| node.is_stalled());
        let mut waited = tokio::task::JoinSet::new();
        for node in masters {
            let not_waited = node.is_stalled() && !every_one_stalled;
            let cmd = cmd.clone();
            let part = async move {
                let bound = node.options().response_timeout;
                match tokio::time::timeout(bound, node.request(Request::One(&cmd), true)).await {
                    Ok(reply) => reply.and_then(Value::extract_error),
                    Err(_) => {
                        node.stall();
                        Err(no_answer(format!(
                            "the Redis Cluster master {} did not answer within {bound:?}",
                            node.name
                        )))
                    }
                }
            };
            match not_waited {
                true => drop(tokio::spawn(part)),
                false => drop(waited.spawn(part)),
            }
        }
        let (mut answer, mut last) = (None, None);
        loop {
            let next = match answer {
                None => waited.join_next().await,
                Some(_) => tokio::time::timeout(OTHERS_WAITED, waited.join_next()).await.unwrap_or(None),
            };
            match next {
                None => break,
                Some(Ok(Ok(reply))) => answer = answer.or(Some(reply)),
                Some(Ok(Err(e))) => last = Some(e),
                Some(Err(e)) => {
                    last = Some(RedisError::from((ErrorKind::Io, "a request to a master failed", e.to_string())))
                }
            }
        }
        // The parts not waited for still run.
        waited.detach_all();
        answer.ok_or_else(|| {
            last.unwrap_or_else(|| {
                RedisError::from((ErrorKind::ClusterConnectionNotFound, "no Redis Cluster master known"))
            })
        })
    }
}

/// `cmd` on `node`; the node is remembered as stalled if the caller gives
/// up on it before its answer.
async fn awaited(node: &Node, cmd: Request<'_>, replayable: bool) -> RedisResult<Value> {
    let mut guard = Awaited(Some(node));
    let reply = node.request(cmd, replayable).await;
    guard.0 = None;
    reply
}

/// Where a command goes.
#[derive(Debug, PartialEq, Eq)]
enum Routing<'a> {
    EveryMaster,
    /// To the master of `key`'s slot (of slot 0's for a command of no key);
    /// sent again after a dead socket when `replayable`.
    Key {
        key: &'a [u8],
        replayable: bool,
    },
}

/// `PING` and `SCRIPT LOAD` go to every master; a script call by its first
/// key (after the script and the number of keys), and never resent (it
/// may write); any other command by its first argument.
fn routing_of(cmd: &Cmd) -> Routing<'_> {
    let mut args = cmd.args_iter().map(|arg| match arg {
        Arg::Simple(bytes) => bytes,
        _ => &[][..],
    });
    let name = args.next().unwrap_or_default();
    let is = |names: &[&[u8]]| names.iter().any(|n| name.eq_ignore_ascii_case(n));
    if is(&[b"PING"]) {
        return Routing::EveryMaster;
    }
    let second = args.next();
    if is(&[b"SCRIPT"]) && second.is_some_and(|a| a.eq_ignore_ascii_case(b"LOAD")) {
        return Routing::EveryMaster;
    }
    if is(&[b"EVAL", b"EVALSHA", b"EVAL_RO", b"EVALSHA_RO", b"FCALL", b"FCALL_RO"]) {
        let keys = args.next().filter(|n| *n != b"0");
        let key = keys.and_then(|_| args.next()).unwrap_or_default();
        return Routing::Key { key, replayable: false };
    }
    Routing::Key { key: second.unwrap_or_default(), replayable: true }
}

/// A refusal that a while later may be an answer: the cluster is down
/// until a failover ends, a slot is being moved, a master or a promoted
/// replica is loading its data.
fn is_refused_for_now(error: &RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::ClusterDown
                | ServerErrorKind::TryAgain
                | ServerErrorKind::MasterDown
                | ServerErrorKind::BusyLoading
        )
    )
}

#[derive(Debug, PartialEq, Eq)]
enum Redirect {
    Moved,
    Ask,
}

/// The redirection an error is, with its slot and node (`host:port`).
fn redirect(error: &RedisError) -> Option<(Redirect, u16, String)> {
    let kind = match error.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => Redirect::Moved,
        ErrorKind::Server(ServerErrorKind::Ask) => Redirect::Ask,
        _ => return None,
    };
    let (node, slot) = error.redirect_node()?;
    Some((kind, slot, node.to_owned()))
}

/// `ASKING` then `cmd`'s commands, written together: the asked node runs
/// the next command of the connection for a slot it is importing.
fn asking(cmd: Request<'_>) -> Pipeline {
    let mut pipeline = redis::pipe();
    pipeline.add_command(redis::cmd("ASKING"));
    match cmd {
        Request::One(cmd) => drop(pipeline.add_command(cmd.clone())),
        Request::Pipelined(commands) => {
            for cmd in commands.cmd_iter() {
                pipeline.add_command(cmd.clone());
            }
        }
    }
    pipeline
}

/// The reply the request would have had without the `ASKING` before it:
/// its one command's, or its pipeline's array.
fn without_asking(reply: Value, one: bool) -> Value {
    match reply {
        Value::Array(mut replies) if !replies.is_empty() => {
            replies.remove(0);
            match one {
                true => replies.pop().unwrap_or(Value::Nil),
                false => Value::Array(replies),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Cmd {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd
    }

    #[test]
    fn a_command_goes_by_its_key_or_to_every_master() {
        let key = |key: &'static str, replayable| Routing::Key { key: key.as_bytes(), replayable };
        assert_eq!(routing_of(&cmd(&["PING"])), Routing::EveryMaster);
        assert_eq!(routing_of(&cmd(&["script", "load", "return 1"])), Routing::EveryMaster);
        assert_eq!(routing_of(&cmd(&["SCRIPT", "EXISTS", "abc"])), key("EXISTS", true));
        assert_eq!(routing_of(&cmd(&["DEL", "{t}k"])), key("{t}k", true));
        assert_eq!(routing_of(&cmd(&["EVALSHA", "abc", "2", "k1", "k2", "x"])), key("k1", false));
        assert_eq!(routing_of(&cmd(&["EVAL", "return 1", "0", "x"])), key("", false));
        assert_eq!(routing_of(&cmd(&["CLUSTER"])), key("", true));
    }

    #[test]
    fn redirections_and_refusals_are_read_from_the_error() {
        // As Redis writes them on the wire.
        let error = |code: &str, detail: &str| {
            let reply = redis::parse_redis_value(format!("-{code} {detail}\r\n").as_bytes()).unwrap();
            reply.extract_error().unwrap_err()
        };
        assert_eq!(
            redirect(&error("MOVED", "3999 127.0.0.1:6381")),
            Some((Redirect::Moved, 3999, "127.0.0.1:6381".into()))
        );
        assert_eq!(redirect(&error("ASK", "12 ::1:7000")), Some((Redirect::Ask, 12, "::1:7000".into())));
        assert_eq!(redirect(&error("ERR", "anything")), None);
        assert!(is_refused_for_now(&error("CLUSTERDOWN", "The cluster is down")));
        assert!(is_refused_for_now(&error("TRYAGAIN", "Multiple keys request during rehashing of slot")));
        assert!(!is_refused_for_now(&error("NOSCRIPT", "No matching script")));
    }

    #[test]
    fn an_asked_request_is_answered_as_without_asking() {
        let one = cmd(&["EVALSHA", "abc", "1", "k"]);
        let asked = asking(Request::One(&one));
        assert_eq!(asked.cmd_iter().count(), 2);
        let reply = Value::Array(vec![Value::Okay, Value::Int(7)]);
        assert_eq!(without_asking(reply, true), Value::Int(7));
        let mut pipeline = redis::pipe();
        pipeline.add_command(one).add_command(cmd(&["WAIT", "1", "100"]));
        assert_eq!(asking(Request::Pipelined(&pipeline)).cmd_iter().count(), 3);
        let reply = Value::Array(vec![Value::Okay, Value::Int(7), Value::Int(1)]);
        assert_eq!(without_asking(reply, false), Value::Array(vec![Value::Int(7), Value::Int(1)]));
    }
}
