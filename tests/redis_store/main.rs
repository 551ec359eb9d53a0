//! The Redis store's scripts and batches: one EVALSHA per decision, group
//! commit and its isolation, refunds in batches, script reloads, the state
//! layouts and formats, TTLs, and Redis's clock against clients' skewed ones.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test redis_store` runs them, `cargo test --test redis_store MODULE::` one module.

#[cfg(feature = "redis")]
mod backend;
#[cfg(feature = "redis")]
mod batch_isolation;
#[cfg(feature = "redis")]
mod batching;
#[cfg(feature = "redis")]
mod bucket_state_formats;
#[cfg(feature = "redis")]
mod clock_skew;
#[cfg(feature = "redis")]
mod fixed_window_counter;
#[cfg(feature = "redis")]
mod policy_reply;
#[cfg(feature = "redis")]
mod refund_batches;
#[cfg(feature = "redis")]
mod script_reload;
#[cfg(feature = "redis")]
mod server_clock_ttl;
#[cfg(feature = "redis")]
mod settle_server_clock;
#[cfg(feature = "redis")]
mod sliding_log;
#[cfg(feature = "redis")]
mod sliding_window_layout;
#[cfg(feature = "redis")]
mod sliding_window_ring;
#[cfg(feature = "redis")]
mod state_in_place;
