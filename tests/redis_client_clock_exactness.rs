#![cfg(feature = "redis")]
//! Exactness on a client clock: every call dated by its process's wall
//! clock (`SystemClock`), deny cache off, every task on one key. Calls
//! stamped in one order reach the store in another; a late one must never
//! reopen capacity a later one already used. Each admitted call's
//! `decided_at` (the time it was judged at) is replayed against the
//! policy's definition (`redlimit_test_support::exactness`).
//!
//! On Redis: 4 OS processes × 50 tasks, for every algorithm. In memory: 200
//! tasks of this process on a 2-thread runtime. Every task makes a fixed
//! count of calls; the test asserts each made its count and that nothing
//! was over-admitted, which holds on a slow machine as on a fast one.
//!
//! The workers are this test binary again, running only `exactness_worker`
//! with `REDLIMIT_EXACTNESS_WORKER` set.
//!
//! `cargo test --test redis_client_clock_exactness` (needs `redis-server`)

use redlimit_test_support::exactness::{self, Bound, Timing, Worker, ALGORITHMS};
use redlimit_test_support::redis_server::RedisServer;
use std::time::Instant;

const PROCESSES: usize = 4;
const TASKS: u64 = 50;
/// Calls per task: 10 000 decisions per algorithm on Redis.
const CALLS: u64 = 50;

/// The body of a worker process; without `REDLIMIT_EXACTNESS_WORKER` (an
/// ordinary `cargo test`) it does nothing.
#[test]
fn exactness_worker() {
    let Some(worker) = Worker::from_env() else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(worker.run());
}

#[test]
fn four_processes_on_their_own_clocks_never_over_admit_on_one_key() {
    let server = RedisServer::start();
    for algo in ALGORITHMS {
        let worker = Worker {
            url: server.url(),
            algo: algo.into(),
            tasks: TASKS,
            bound: Bound::Calls(CALLS),
            timing: Timing::Client,
        };
        let commands = worker.test_processes(PROCESSES);
        let started = Instant::now();
        let o = exactness::run_on(Timing::Client, algo, commands);
        println!(
            "redis {algo}: {} decisions, {} admitted over {:?} of client time, {} over-admitted, in {:?}",
            o.decisions(),
            o.admitted,
            o.span,
            o.over,
            started.elapsed()
        );
        assert_eq!(o.per_worker, [TASKS * CALLS; PROCESSES], "{algo}: every worker makes its full count");
        assert_eq!(o.over, 0, "{algo}: over-admitted on a client clock");
        assert!(o.admitted > 0, "{algo}: nothing admitted");
    }
}

/// 200 tasks × 200 calls, a millisecond apart, on one key of the memory store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_on_a_client_clock_never_over_admit_in_memory() {
    const MEMORY_TASKS: u64 = 200;
    const MEMORY_CALLS: u64 = 200;
    for algo in ALGORITHMS {
        let o = exactness::in_memory(algo, MEMORY_TASKS, MEMORY_CALLS).await;
        println!(
            "memory {algo}: {} decisions, {} admitted over {:?}, {} over-admitted",
            o.decisions(),
            o.admitted,
            o.span,
            o.over
        );
        assert_eq!(o.decisions(), MEMORY_TASKS * MEMORY_CALLS, "{algo}: every task makes its full count");
        assert_eq!(o.over, 0, "{algo}: over-admitted on a client clock");
        assert!(o.admitted > 0, "{algo}: nothing admitted");
    }
}
