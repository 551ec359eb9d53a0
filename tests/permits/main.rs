//! Concurrency permits: the memory store's and Redis's answers compared, a
//! permit held exactly as long as the code holding it runs, and a permit
//! given back before the calls that follow it are decided.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test permits` runs them, `cargo test --test permits MODULE::` one module.

#[cfg(feature = "redis")]
mod concurrency_parity;
mod concurrency_permits;
mod release_order;
