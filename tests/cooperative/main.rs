//! Answers made in this process (a remembered denial, the memory store, an
//! open breaker) spend tokio's cooperative budget, so loopers on them do not
//! delay another task. Grouped together and apart from the rest: each test
//! times another task while its own loopers keep a 2-worker runtime busy, so
//! it runs only beside tests of the same kind, as it did before.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test cooperative` runs them, `cargo test --test cooperative MODULE::` one module.

#[cfg(feature = "redis")]
mod local_answers;
#[cfg(feature = "redis")]
mod open_breaker;
