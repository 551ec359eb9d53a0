//! The memory store: keys dropped once untouched, and its concurrency state
//! giving the script's answers.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test memory` runs them, `cargo test --test memory MODULE::` one module.

mod bounded;
#[cfg(feature = "redis")]
mod concurrency_parity;
