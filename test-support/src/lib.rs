//! What the workspace's examples and integration tests share; nothing here is
//! published.
//!
//! - `redis_server`, `redis_cluster`: real, private `redis-server`
//!   processes (single, Sentinel, TLS, a 3+3 cluster) on free loopback
//!   ports, so tests never touch a Redis they did not start;
//!   `redis_sentinel`, a master, replicas and three sentinels.
//! - [`silent_listener`]: a port that accepts connections and never
//!   answers, to bound connects against.
//! - `stores`: the memory store and a Redis store side by side on one
//!   manual clock.
//! - [`runtime`]: one runtime per test binary, for tests on the global store.
//! - `exactness`: replaying admitted calls against a policy's definition,
//!   and the worker processes of the exactness test and example.
//! - [`child_process`]: the test binary run again as a child process, one
//!   test selected: load from several processes, a process killed mid-call.
//! - [`programs`]: a test that needs a program not installed fails naming
//!   the package.
//! - [`http`]: requests to an axum router in process, and their responses.
//! - [`log_capture`], [`metrics_capture`]: what `tracing` and `metrics` saw.
//! - [`timers`]: how late a timer fires while other tasks loop.
//! - [`meet`]: the reference model a randomized run of every feature
//!   together is replayed against; [`meet_calls`] and [`meet_holders`],
//!   the calls and permit holders of that run.
//!
//! What needs Redis (servers, both stores, exactness workers) is behind the
//! default feature `redis`, so the memory-only tests build without it.

pub mod child_process;
#[cfg(feature = "redis")]
pub mod exactness;
pub mod http;
pub mod log_capture;
pub mod meet;
pub mod meet_calls;
pub mod meet_holders;
pub mod metrics_capture;
pub mod programs;
#[cfg(feature = "redis")]
pub mod redis_cluster;
#[cfg(feature = "redis")]
pub mod redis_sentinel;
#[cfg(feature = "redis")]
pub mod redis_server;
pub mod runtime;
pub mod silent_listener;
#[cfg(feature = "redis")]
pub mod stores;
pub mod timers;
