//! One tokio runtime for a whole test binary, for the binaries whose tests
//! share the process-wide store (`redlimit::init`, set once per process).
//!
//! A `#[tokio::test]` runs on a runtime of its own that ends with the test,
//! and a Redis connection ends with the runtime it was made on: the global
//! store built in one such test would be dead in the next. So these binaries
//! write plain `#[test]`s whose bodies run with [`block_on`] on this runtime,
//! which lives as long as the process, and build their global store on it
//! once. Tests still run in parallel, one per test thread; each `block_on`
//! drives its own future, and whatever they spawn shares the worker threads.
//!
//! ```
//! let answer = redlimit_test_support::runtime::block_on(async { 6 * 7 });
//! assert_eq!(answer, 42);
//! ```

use once_cell::sync::OnceCell;
use std::future::Future;
use tokio::runtime::Runtime;

/// The process-wide multi-thread runtime, built on first use.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceCell<Runtime> = OnceCell::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("build the test binary's runtime")
    })
}

/// Runs `future` to completion on [`runtime`], from the calling (test) thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    runtime().block_on(future)
}
