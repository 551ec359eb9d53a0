//! Batches: the calls of one script that wait at the same time, sent to
//! Redis as one script call. The folder owns the batcher (`batch.rs`), a call
//! of a batch and how a batch fails (`batched.rs`), how a batch's reply reads
//! (`batch_reply.rs`), and which calls may share one (`grouping.rs`).
//!
//! # Group commit
//!
//! Redis spends much of a script call on the call itself (arguments, script
//! entry, reply), so under load the calls of one backend that run one script
//! (one family, whatever the limiter or policy) share script calls. Each lane,
//! a script and a group of keys (one server or Sentinel master: all of them; a
//! cluster node: its slots, by `grouping.rs`'s slot map; a cluster that
//! refuses scripts across slots: one slot), keeps at most a few script calls
//! in flight. A call that finds room is sent at once, alone: a lone call is
//! never held for company. A call that finds none queues; when a script call
//! of its group comes back, the calls then waiting (up to a bound, in arrival
//! order; callers that gave up are left out) go in the next one, on a task of
//! its own that yields once after each batch, so the callers it just answered
//! call again into the next batch rather than the one after.
//!
//! - Per call, still: each call goes through the whole pipeline, so the deny
//!   cache, metrics, spans and `on_error` see it. A waiting call is bounded by
//!   the response timeout from when it queued. A batch that fails fails each
//!   call with the same error; one malformed reply fails its own call only.
//! - A cluster's slots move: a node that does not serve all of a batch's keys
//!   refuses it before deciding anything (`NONLOCAL`, or `MOVED` for the
//!   declared key); the map is learnt again and the calls are sent one by one.
//! - `RedisOptions::batching` (on by default) turns it off.

pub(super) mod batch;
pub(super) mod batch_reply;
pub(super) mod batched;
pub(super) mod grouping;
