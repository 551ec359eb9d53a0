//! A real Redis Cluster (3 masters, 3 replicas): the same behaviour as a
//! single server, failover, and group commit across slots.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test cluster` runs them, `cargo test --test cluster MODULE::` one module.

#[cfg(feature = "redis")]
mod batching;
#[cfg(feature = "redis")]
mod node_down;
#[cfg(feature = "redis")]
mod redis_cluster;
