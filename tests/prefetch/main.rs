//! Prefetch's burst bound per key, and a prefetching call's wait for a
//! refill in flight. Prefetch's metrics and processes each have a binary of
//! their own (`limiter_prefetch*.rs`, `prefetch_memory.rs`).
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test prefetch` runs them, `cargo test --test prefetch MODULE::` one module.

#[cfg(feature = "redis")]
mod bounds;
#[cfg(feature = "redis")]
mod waits;
