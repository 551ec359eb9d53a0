//! Nothing to see here: this package holds the runnable examples
//! (`examples/`) and the integration tests (`tests/`). What they share lives
//! in the `redlimit-test-support` crate (`test-support/`).

/// The README's Rust snippets, compiled (and run, unless `no_run`) as doctests
/// by `cargo test`, so every signature it shows compiles as written.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
