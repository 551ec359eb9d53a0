//! Connecting to Redis: every misconfiguration an error that says what it
//! is, a missing password, TLS and ACL, Sentinel and its failovers, `RedisOptions`, and Redis
//! closing idle clients.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test connection` runs them, `cargo test --test connection MODULE::` one module.

#[cfg(feature = "redis")]
mod failover;
#[cfg(feature = "redis")]
mod idle_disconnect;
#[cfg(feature = "redis")]
mod misconfig_errors;
#[cfg(feature = "redis")]
mod missing_password;
#[cfg(feature = "redis")]
mod options;
#[cfg(feature = "redis")]
mod replica_acks;
#[cfg(feature = "redis")]
mod sentinel;
#[cfg(feature = "redis")]
mod tls_acl;
