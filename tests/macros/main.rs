//! `#[rate_limit]` on stores given by `redlimit::scope`: dry-run trials,
//! prefetch, settlements, and scopes kept apart. The attribute's tests on the global
//! store each have a binary of their own (`macro_*.rs`).
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test macros` runs them, `cargo test --test macros MODULE::` one module.

mod dry_run;
#[cfg(feature = "redis")]
mod prefetch;
mod scope;
#[cfg(feature = "redis")]
mod settle;
#[cfg(feature = "redis")]
mod stacked;
