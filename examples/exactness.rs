//! Exactness across processes, as a manual tool: 4 OS processes × 50 tasks
//! hammer the same keys for every algorithm, on a private single Redis or
//! (`--cluster`) a private 3+3 Redis Cluster, for a time per algorithm.
//! Each admitted call's server timestamp (`Decision::decided_at`) is
//! replayed against the policy's definition: no window or bucket may ever
//! have admitted more than its policy allows (for `sliding_window`, no run
//! of W/P aligned sub-windows). The workers, policies and checks are
//! `redlimit_test_support::exactness`, which `tests/redis_exactness.rs`
//! runs bounded by a count of calls instead.
//!
//! ```sh
//! cargo run --release --example exactness                 # single server
//! cargo run --release --example exactness -- --cluster    # Redis Cluster
//! cargo run --release --example exactness -- --seconds 3 --processes 4 --tasks 50
//! ```
//!
//! Prints decisions and admissions per algorithm and exits non-zero on any
//! over-admission.

use redlimit_test_support::exactness::{self, Bound, Timing, Worker, ALGORITHMS, KEYS};
use redlimit_test_support::redis_cluster::RedisCluster;
use redlimit_test_support::redis_server::RedisServer;
use std::process::{Command, ExitCode};
use std::time::Duration;

fn number(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a whole number"))
}

#[tokio::main]
async fn main() -> ExitCode {
    if let Some(worker) = Worker::from_env() {
        worker.run().await;
        return ExitCode::SUCCESS;
    }
    let (processes, tasks, seconds) = (number("--processes", 4), number("--tasks", 50), number("--seconds", 1));
    let cluster = std::env::args().any(|a| a == "--cluster");
    let (_server, _cluster, url) = if cluster {
        let c = RedisCluster::start();
        let url = c.url();
        (None, Some(c), url)
    } else {
        let s = RedisServer::start();
        let url = s.url();
        (Some(s), None, url)
    };
    let topology = if cluster { "cluster" } else { "single" };
    println!(
        "{processes} processes x {tasks} tasks, {KEYS} shared keys, {seconds} s per algorithm, on a {topology} Redis"
    );
    println!("{:<16}{:>10}{:>10}{:>16}", "algorithm", "decisions", "admitted", "over-admitted");
    let (mut decisions, mut over) = (0, 0);
    let exe = std::env::current_exe().unwrap();
    for algo in ALGORITHMS {
        let bound = Bound::For(Duration::from_secs(seconds));
        let worker = Worker { url: url.clone(), algo: algo.into(), tasks, bound, timing: Timing::Server };
        let commands = (0..processes).map(|_| worker.command(Command::new(&exe))).collect();
        let o = tokio::task::block_in_place(|| exactness::run(algo, commands));
        println!("{algo:<16}{:>10}{:>10}{:>16}", o.decisions(), o.admitted, o.over);
        decisions += o.decisions();
        over += o.over;
    }
    println!("total: {decisions} decisions, {over} over-admitted");
    // Returned, not process::exit: the private Redis must be dropped (killed).
    if over > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
