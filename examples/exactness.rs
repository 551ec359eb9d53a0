//! Exactness across processes: 4 OS processes × 50 tasks hammer the same
//! keys for every algorithm, on a private single Redis or (`--cluster`) a
//! private 3+3 Redis Cluster. Each admitted call's server timestamp
//! (`Decision::decided_at`) is replayed against the policy's definition:
//! no window or bucket may ever have admitted more than its policy allows
//! (for `sliding_window`, no run of W/P aligned sub-windows).
//!
//! ```sh
//! cargo run --release --example exactness                 # single server
//! cargo run --release --example exactness -- --cluster    # Redis Cluster
//! cargo run --release --example exactness -- --seconds 3 --processes 4 --tasks 50
//! ```
//!
//! Prints decisions and admissions per algorithm and exits non-zero on any
//! over-admission.

use ratelimit::{Limiter, Policy, RedisOptions, Store};
use ratelimit_test_support::exactness;
use ratelimit_test_support::redis_cluster::RedisCluster;
use ratelimit_test_support::redis_server::RedisServer;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

const KEYS: usize = 4;

/// The policies under test, by algorithm name; windows short enough that
/// many of them pass (and refill) during a run.
fn policy(algo: &str) -> Policy {
    match algo {
        "fixed_window" => Policy::fixed_window("50/100ms,200/1s"),
        "sliding_window" => Policy::sliding_window("50/100ms", "10ms"),
        "sliding_log" => Policy::sliding_log("50/100ms,200/1s"),
        "token_bucket" => Policy::token_bucket(50, "500/1s"),
        "leaky_bucket" => Policy::leaky_bucket(50, "500/1s"),
        "gcra" => Policy::gcra("500/1s", 49),
        other => panic!("unknown algorithm {other}"),
    }
    .unwrap()
}

/// Over-admissions of one key's admitted calls under `algo`'s policy.
fn over_admissions(algo: &str, hits: &[(u64, u64)]) -> usize {
    match algo {
        "fixed_window" => exactness::fixed_window(hits, 50, 100_000) + exactness::fixed_window(hits, 200, 1_000_000),
        "sliding_window" => exactness::sliding_window(hits, 50, 100_000, 10_000),
        "sliding_log" => exactness::sliding_log(hits, 50, 100_000) + exactness::sliding_log(hits, 200, 1_000_000),
        "token_bucket" => exactness::token_bucket(hits, 50, 500, 1_000_000),
        "leaky_bucket" => exactness::leaky_bucket(hits, 50, 500, 1_000_000),
        "gcra" => exactness::gcra(hits, 49, 500, 1_000_000),
        other => panic!("unknown algorithm {other}"),
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn number(name: &str, default: u64) -> u64 {
    arg(name).map_or(default, |v| v.parse().expect("a whole number"))
}

/// A worker process: `tasks` tasks on one multiplexed connection for
/// `millis`; prints `admit <key> <decided_at_us>` per admitted call and
/// `decisions <n>` at the end.
async fn worker(url: &str, algo: &str, tasks: u64, millis: u64) {
    // A throughput run on two cores: give calls time rather than count
    // timeouts (a timed-out call may have been admitted unseen).
    let options = RedisOptions { response_timeout: Duration::from_secs(5), ..RedisOptions::default() };
    let store = Store::redis_with(url, options).await.expect("worker connects");
    // Every decision goes to Redis: the deny cache would answer most
    // denials in process (its own exactness is tested in tests/limiter_deny_cache.rs).
    let limiter = Limiter::new(format!("exactness-{algo}"), policy(algo), &store).with_deny_cache(false);
    let end = Instant::now() + Duration::from_millis(millis);
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let (mut admitted, mut decisions) = (Vec::new(), 0u64);
                let mut i = task as usize;
                while Instant::now() < end {
                    let key = i % KEYS;
                    i += 1;
                    let d = limiter.check(format!("key-{key}"), 1).await.expect("the store decides");
                    decisions += 1;
                    if d.allowed {
                        admitted.push((key, d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64));
                    }
                }
                (admitted, decisions)
            })
        })
        .collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut total = 0;
    for handle in handles {
        let (admitted, decisions) = handle.await.unwrap();
        total += decisions;
        for (key, t) in admitted {
            writeln!(out, "admit {key} {t}").unwrap();
        }
    }
    writeln!(out, "decisions {total}").unwrap();
}

struct Outcome {
    decisions: u64,
    admitted: usize,
    over: usize,
}

fn run(url: &str, algo: &str, processes: u64, tasks: u64, millis: u64) -> Outcome {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--worker",
                    "--url",
                    url,
                    "--algo",
                    algo,
                    "--tasks",
                    &tasks.to_string(),
                    "--millis",
                    &millis.to_string(),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a worker process")
        })
        .collect();
    let mut per_key: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    let mut decisions = 0;
    for mut child in children {
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["admit", key, t] => per_key.entry(key.parse().unwrap()).or_default().push((t.parse().unwrap(), 1)),
                ["decisions", n] => decisions += n.parse::<u64>().unwrap(),
                _ => panic!("unexpected worker output: {line}"),
            }
        }
        assert!(child.wait().unwrap().success(), "a worker failed");
    }
    Outcome {
        decisions,
        admitted: per_key.values().map(Vec::len).sum(),
        over: per_key.values().map(|hits| over_admissions(algo, hits)).sum(),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--worker") {
        let (url, algo) = (arg("--url").unwrap(), arg("--algo").unwrap());
        worker(&url, &algo, number("--tasks", 50), number("--millis", 1000)).await;
        return ExitCode::SUCCESS;
    }
    let (processes, tasks, millis) = (number("--processes", 4), number("--tasks", 50), number("--seconds", 1) * 1000);
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
        "{processes} processes x {tasks} tasks, {KEYS} shared keys, {} ms per algorithm, on a {topology} Redis",
        millis
    );
    println!("{:<16}{:>10}{:>10}{:>16}", "algorithm", "decisions", "admitted", "over-admitted");
    let (mut decisions, mut over) = (0, 0);
    for algo in ["fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"] {
        let o = tokio::task::block_in_place(|| run(&url, algo, processes, tasks, millis));
        println!("{algo:<16}{:>10}{:>10}{:>16}", o.decisions, o.admitted, o.over);
        decisions += o.decisions;
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
