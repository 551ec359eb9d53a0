//! Redis failing under load: killed, frozen and restarted, a soak through
//! all of them, the first call's timeout, and what is logged and counted
//! meanwhile.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test outage` runs them, `cargo test --test outage MODULE::` one module.

#[cfg(feature = "redis")]
mod first_call_timeout;
#[cfg(feature = "redis")]
mod logging;
#[cfg(feature = "redis")]
mod recovery;
#[cfg(feature = "redis")]
mod soak;
#[cfg(feature = "redis")]
mod store_errors;
