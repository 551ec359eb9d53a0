//! Nothing to see here: this package holds the runnable examples
//! (`examples/`) and the integration tests (`tests/`). What they share lives
//! in the `redlimit-test-support` crate (`test-support/`).
