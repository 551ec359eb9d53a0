#![cfg(feature = "redis")]
//! Prefetch across processes: 4 processes × 50 tasks on one hot key, per
//! algorithm that takes prefetch, k = 100, on this test's own Redis. The
//! processes are this test binary again, running only `child_process`
//! (which does nothing without `CHILD_VAR`).
//!
//! Each algorithm runs twice. Under its limit: the script calls Redis ran
//! (`INFO commandstats`) are at most about one per k decisions once warm.
//! At its limit: every admitted call's time, read from the system clock
//! (one clock for every process on this machine, and Redis's own) before
//! and after the call, is replayed: a fixed window admits at most its limit
//! per window, exactly, and a bucket or GCRA within the prefetch guide's bound for
//! every interval. Every run is a count of decisions, never a duration, so
//! a slow machine only spreads the same calls over more time.

use redlimit::{Limiter, Policy, RedisOptions, Store, DEFAULT_PREFETCH_TTL};
use redlimit_test_support::redis_server::RedisServer;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CHILD_VAR: &str = "REDLIMIT_PREFETCH_CHILD";
const PROCESSES: usize = 4;
const TASKS: usize = 50;
const DECISIONS_PER_TASK: usize = 50;
const K: u64 = 100;

/// (name, policy under which nothing is denied, policy held at its limit).
fn cases() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("fixed_window", "fixed_window 100000/1h", "fixed_window 2000/200ms"),
        ("token_bucket", "token_bucket 100000 1000/1s", "token_bucket 500 5000/1s"),
        ("leaky_bucket", "leaky_bucket 100000 1000/1s", "leaky_bucket 500 5000/1s"),
        ("gcra", "gcra 1000/1s 99999", "gcra 5000/1s 499"),
    ]
}

fn policy(text: &str) -> Policy {
    let words: Vec<&str> = text.split(' ').collect();
    match words[..] {
        ["fixed_window", strategies] => Policy::fixed_window(strategies).unwrap(),
        ["token_bucket", capacity, rate] => Policy::token_bucket(capacity.parse().unwrap(), rate).unwrap(),
        ["leaky_bucket", capacity, rate] => Policy::leaky_bucket(capacity.parse().unwrap(), rate).unwrap(),
        ["gcra", rate, burst] => Policy::gcra(rate, burst.parse().unwrap()).unwrap(),
        _ => panic!("unknown policy {text}"),
    }
}

fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// One admitted call: the system clock before and after it, and when the
/// window its permit was taken in ends (fixed window).
#[derive(Debug, Clone, Copy)]
struct Admitted {
    before_us: u64,
    after_us: u64,
    window_end_us: u64,
}

/// A child process: `CHILD_VAR` is `<redis url>|<limiter name>|<policy>|<output file>`.
#[test]
fn child_process() {
    let Ok(spec) = std::env::var(CHILD_VAR) else { return };
    let [url, name, policy_text, out] = spec.split('|').collect::<Vec<_>>()[..] else { panic!("bad {CHILD_VAR}") };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let lines = runtime.block_on(async {
        // Patient with Redis: on a loaded machine the default timeout fails calls, which is not what this measures.
        let options = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
        let store = Store::redis_with(url, options).await.unwrap();
        let limiter = Limiter::new(name, policy(policy_text), &store).with_prefetch(K).unwrap();
        barrier(url, name).await;
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let mut admitted = Vec::new();
                    for _ in 0..DECISIONS_PER_TASK {
                        let before_us = wall_us();
                        let decision = limiter.check("hot", 1).await.unwrap();
                        let after_us = wall_us();
                        if decision.allowed {
                            let end = decision.decided_at + decision.reset_after;
                            let window_end_us = end.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
                            admitted.push(Admitted { before_us, after_us, window_end_us });
                        }
                    }
                    admitted
                })
            })
            .collect();
        let mut lines = Vec::new();
        for task in tasks {
            for a in task.await.unwrap() {
                lines.push(format!("{} {} {}", a.before_us, a.after_us, a.window_end_us));
            }
        }
        let s = limiter.prefetch_stats();
        lines.insert(0, format!("{} {} {} {}", s.prefetched, s.spent, s.returned, s.wasted));
        lines
    });
    std::fs::write(out, lines.join("\n")).unwrap();
}

/// Waits until every process is connected, so they run side by side.
async fn barrier(url: &str, name: &str) {
    let mut con = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    let key = format!("barrier:{name}");
    let _: u64 = redis::cmd("INCR").arg(&key).query_async(&mut con).await.unwrap();
    for _ in 0..2000 {
        let ready: u64 = redis::cmd("GET").arg(&key).query_async(&mut con).await.unwrap();
        if ready as usize >= PROCESSES {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the other processes did not start");
}

/// What every process admitted, and their prefetch counts summed.
struct Run {
    admitted: Vec<Admitted>,
    stats: [u64; 4],
    script_calls: u64,
}

fn run(server: &RedisServer, name: &str, policy_text: &str) -> Run {
    let exe = std::env::current_exe().unwrap();
    let dir = std::env::temp_dir().join(format!("redlimit-prefetch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let before = redlimit_test_support::runtime::block_on(server.evalsha_calls());
    let children: Vec<_> = (0..PROCESSES)
        .map(|i| {
            let out = dir.join(format!("{name}-{i}"));
            let spec = format!("{}|{name}|{policy_text}|{}", server.url(), out.display());
            let child = Command::new(&exe)
                .args(["--exact", "child_process", "--nocapture", "--test-threads=1"])
                .env(CHILD_VAR, spec)
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut run = Run { admitted: Vec::new(), stats: [0; 4], script_calls: 0 };
    for (mut child, out) in children {
        assert!(child.wait().unwrap().success(), "a child process failed");
        let text = std::fs::read_to_string(&out).unwrap();
        let mut lines = text.lines();
        let stats: Vec<u64> = lines.next().unwrap().split(' ').map(|n| n.parse().unwrap()).collect();
        for (sum, n) in run.stats.iter_mut().zip(stats) {
            *sum += n;
        }
        for line in lines {
            let n: Vec<u64> = line.split(' ').map(|n| n.parse().unwrap()).collect();
            run.admitted.push(Admitted { before_us: n[0], after_us: n[1], window_end_us: n[2] });
        }
    }
    run.script_calls = redlimit_test_support::runtime::block_on(server.evalsha_calls()) - before;
    run
}

/// The rate of every bucket and GCRA policy held at its limit, per second.
const AT_RATE_PER_S: u64 = 5000;

/// The prefetch guide's bound on the calls a bucket or GCRA policy (at `AT_RATE_PER_S`)
/// admits under prefetch in any span of `span_us`: what it holds when full,
/// its rate over the span, and the lesser of its rate over the prefetch TTL
/// and what the processes may hold (k - 1 each).
fn prefetch_bound(policy: &Policy, span_us: u64, ttl_us: u64) -> u64 {
    let extra = (ttl_us * AT_RATE_PER_S / 1_000_000).min(PROCESSES as u64 * (K - 1));
    policy.max_cost() + span_us * AT_RATE_PER_S / 1_000_000 + extra
}

#[test]
fn four_processes_on_one_hot_key_take_about_one_script_call_per_k_decisions_and_keep_the_bound() {
    let server = RedisServer::start();
    let decisions = (PROCESSES * TASKS * DECISIONS_PER_TASK) as u64;
    // Each process's refills of 1, 2, 4, ... 64 before it takes k at once,
    // and its tasks' first calls, which find its first refill in flight
    // with no room for them and go to the store alone rather than wait.
    let warm_up = PROCESSES as u64 * (64 - K.leading_zeros() as u64 + 1 + TASKS as u64);
    let ttl_us = DEFAULT_PREFETCH_TTL.as_micros() as u64;
    for (algo, under, at) in cases() {
        let hot = run(&server, &format!("under-{algo}"), under);
        let [prefetched, spent, returned, wasted] = hot.stats;
        println!(
            "{algo} under its limit: {} script calls for {decisions} decisions; prefetched {prefetched}, spent {spent}, returned {returned}, wasted {wasted}",
            hot.script_calls
        );
        assert_eq!(hot.admitted.len() as u64, decisions, "{algo}: nothing denied under the limit");
        assert_eq!(spent, decisions, "{algo}");
        assert!(
            hot.script_calls <= 2 * decisions / K + warm_up,
            "{algo}: {} script calls for {decisions} decisions (k = {K})",
            hot.script_calls
        );

        let limited = run(&server, &format!("at-{algo}"), at);
        let [prefetched, spent, returned, wasted] = limited.stats;
        println!(
            "{algo} at its limit: admitted {} of {decisions} in {} script calls; prefetched {prefetched}, spent {spent}, returned {returned}, wasted {wasted}",
            limited.admitted.len(),
            limited.script_calls
        );
        assert_eq!(spent, limited.admitted.len() as u64, "{algo}");
        // What each process still holds when its run ends: at most k - 1.
        let held = prefetched - (spent + returned + wasted);
        assert!(held < PROCESSES as u64 * K, "{algo}: {held} permits unaccounted for");
        let policy = policy(at);
        if algo == "fixed_window" {
            check_windows(&policy, &limited.admitted);
        } else {
            check_intervals(algo, &policy, &limited.admitted, ttl_us);
        }
    }
}

/// Each window admitted at most its limit, and every call spent from it
/// was made before it ended.
fn check_windows(policy: &Policy, admitted: &[Admitted]) {
    let limit = policy.strategies()[0].limit;
    let mut ends: Vec<u64> = admitted.iter().map(|a| a.window_end_us).collect();
    ends.sort_unstable();
    // Windows are 200 ms apart; one window's end reads within a ms (Redis's PTTL) across its decisions.
    let mut windows: Vec<(u64, u64)> = Vec::new();
    for end in ends {
        match windows.last_mut() {
            Some((first, count)) if end - *first < 5_000 => *count += 1,
            _ => windows.push((end, 1)),
        }
    }
    assert!(windows.len() > 1 || windows[0].1 == limit, "the limit was reached: {windows:?}");
    for (end, count) in &windows {
        assert!(*count <= limit, "a window ending at {end} admitted {count} > {limit}");
    }
    for a in admitted {
        assert!(a.before_us <= a.window_end_us + 2_000, "a call spent after its window ended: {a:?}");
    }
}

/// For every span T, the calls made wholly within some span of T number
/// at most the bound the prefetch guide states (`redlimit::guide::prefetch`).
fn check_intervals(algo: &str, policy: &Policy, admitted: &[Admitted], ttl_us: u64) {
    let mut calls = admitted.to_vec();
    calls.sort_unstable_by_key(|a| a.before_us);
    for span_us in [ttl_us / 2, ttl_us, 4 * ttl_us, 20 * ttl_us] {
        let bound = prefetch_bound(policy, span_us, ttl_us);
        let mut worst = 0;
        for (i, start) in calls.iter().enumerate() {
            let end = start.before_us + span_us;
            let within =
                calls[i..].iter().take_while(|a| a.before_us <= end).filter(|a| a.after_us <= end).count() as u64;
            worst = worst.max(within);
        }
        println!("{algo}: at most {worst} calls within {span_us} µs; bound {bound}");
        assert!(worst <= bound, "{algo}: {worst} calls within {span_us} µs > {bound}");
    }
}
