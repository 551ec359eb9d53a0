#![cfg(feature = "redis")]
//! Exactness across processes: for every algorithm, 4 OS processes × 25
//! tasks share 4 keys on one private Redis (and on a private 3+3 Redis
//! Cluster), every decision made by Redis; each admitted call's server
//! timestamp is replayed against the policy's definition
//! (`redlimit_test_support::exactness`).
//!
//! Every task makes a fixed count of calls, never "as many as fit in a
//! second": the test asserts that each worker made its full count and that
//! nothing was over-admitted, which holds on a slow machine as on a fast
//! one. The policies' windows are tens of ms, so even a fast run spans many.
//!
//! The workers are this test binary again, running only `exactness_worker`
//! with `REDLIMIT_EXACTNESS_WORKER` set; `cargo` is not involved.
//!
//! `cargo test --test redis_exactness` (needs `redis-server` and `redis-cli`)

use redlimit_test_support::exactness::{self, Bound, Timing, Worker, ALGORITHMS, KEYS};
use redlimit_test_support::redis_cluster::RedisCluster;
use redlimit_test_support::redis_server::RedisServer;
use std::time::Instant;

const PROCESSES: usize = 4;
const TASKS: u64 = 25;
/// Calls per task: 8 000 decisions per algorithm and topology, 96 000 in
/// all: about 25 s on a loaded 2-core machine in debug, a few on an idle one.
const CALLS: u64 = 80;

/// The body of a worker process; without `REDLIMIT_EXACTNESS_WORKER` (an
/// ordinary `cargo test`) it does nothing.
#[test]
fn exactness_worker() {
    let Some(worker) = Worker::from_env() else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(worker.run());
}

fn every_algorithm_is_exact(url: &str, topology: &str) {
    for algo in ALGORITHMS {
        let worker = Worker {
            url: url.into(),
            algo: algo.into(),
            tasks: TASKS,
            bound: Bound::Calls(CALLS),
            timing: Timing::Server,
        };
        let commands = worker.test_processes(PROCESSES);
        let started = Instant::now();
        let o = exactness::run(algo, commands);
        println!(
            "{topology} {algo}: {} decisions, {} admitted over {:?} of Redis time on {KEYS} keys, {} over-admitted, in {:?}",
            o.decisions(),
            o.admitted,
            o.span,
            o.over,
            started.elapsed()
        );
        assert_eq!(o.per_worker, [TASKS * CALLS; PROCESSES], "{topology} {algo}: every worker makes its full count");
        assert_eq!(o.over, 0, "{topology} {algo}: over-admitted");
        assert!(o.admitted > 0, "{topology} {algo}: nothing admitted");
    }
}

#[test]
fn four_processes_never_over_admit_on_a_single_server() {
    let server = RedisServer::start();
    every_algorithm_is_exact(&server.url(), "single");
    // With batching on (the default), the tasks' waiting calls shared script
    // calls: Redis ran fewer scripts than it made decisions.
    let decisions = ALGORITHMS.len() as u64 * PROCESSES as u64 * TASKS * CALLS;
    let scripts = tokio::runtime::Runtime::new().unwrap().block_on(server.evalsha_calls());
    println!("single: {scripts} EVALSHA for {decisions} decisions");
    assert!(scripts < decisions, "{scripts} EVALSHA for {decisions} decisions: no call was batched");
}

#[test]
fn four_processes_never_over_admit_on_a_cluster() {
    let cluster = RedisCluster::start();
    every_algorithm_is_exact(&cluster.url(), "cluster");
}
