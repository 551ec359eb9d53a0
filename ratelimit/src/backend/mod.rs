//! [`Backend`]: the one trait both stores implement, and what crosses it.

pub(crate) mod memory;
pub(crate) mod redis;

pub use self::memory::MemoryBackend;
pub use self::redis::{RedisBackend, RedisOptions};

use crate::{Error, Policy};
use std::future::Future;
use std::pin::Pin;

/// With a client-supplied clock, keys are kept this long past their reset:
/// Redis expires keys by its own clock, so a client clock running behind (or
/// stepping back, or a manual clock in a test) must not find its state gone.
/// The memory backend keeps the same slack so both give the same answers.
pub(crate) const CLIENT_CLOCK_SLACK_US: u64 = 60_000_000;

/// A boxed, sendable future: what [`Backend`] methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One decision to make.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The full storage key (prefix, algorithm, limiter name and user key).
    pub key: &'a [u8],
    /// The policy to apply.
    pub policy: &'a Policy,
    /// Permits to take (0 reports the state).
    pub cost: u64,
    /// Microseconds since the epoch, or `None` for the store's own clock.
    pub now_us: Option<u64>,
    /// Answer without taking anything.
    pub peek: bool,
}

/// A decision as the store computes it: integers only, exactly what the Lua
/// scripts return. [`Limiter`](crate::Limiter) turns it into a [`Decision`](crate::Decision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The call passes.
    pub allowed: bool,
    /// Limit of the strategy with the least room.
    pub limit: u64,
    /// Permits left after the call.
    pub remaining: u64,
    /// µs until the key is untouched again.
    pub reset_after_us: u64,
    /// µs until the same call would pass; `None` when allowed or never.
    pub retry_after_us: Option<u64>,
    /// Bit `i` set: strategy `i` (declared order) is violated.
    pub violated: u32,
    /// The time the decision was made at, µs since the epoch (the store's
    /// clock, or the one the request carried).
    pub now_us: u64,
    /// Per strategy (declared order), `(remaining, reset_after_us)`, for
    /// window policies with more than one strategy; empty otherwise (then
    /// the fields above describe the only rule).
    pub quotas: Vec<(u64, u64)>,
}

/// A store that decides atomically: the in-process [`MemoryBackend`] and the
/// [`RedisBackend`] give the same outcome for the same requests and clock.
pub trait Backend: Send + Sync + 'static {
    /// Decides one request atomically.
    fn decide<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Outcome, Error>>;

    /// Decides at once, without a future, if this backend can (a store in
    /// this process); `None` (the default) means "use [`decide`](Self::decide)".
    /// `local_now_us` is this process's time of the call, to decide at when
    /// the request carries no time: the caller dates its own records (the
    /// deny cache) with the same reading.
    fn decide_at_once(&self, request: &Request<'_>, local_now_us: u64) -> Option<Outcome> {
        let _ = (request, local_now_us);
        None
    }

    /// The in-process store behind this backend, if it is one: a
    /// [`Limiter`](crate::Limiter) then hashes only the user's part of each key.
    #[doc(hidden)]
    fn as_memory(&self) -> Option<&MemoryBackend> {
        None
    }

    /// Forgets a key: its next call sees an untouched state.
    fn reset<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(), Error>>;

    /// A short name for logs: `"memory"` or `"redis"`.
    fn kind(&self) -> &'static str;
}
