//! Cost growth: `sliding_window` per call as sub-windows grow
//! (`lua/sliding_window.lua`: running totals beside a ring of sub-windows);
//! and `sliding_log` memory per key against its limit.

use crate::load::{evalsha_stats, reset_stats};
use crate::Options;
use redis::aio::MultiplexedConnection;
use redlimit_test_support::redis_server::window_numbers;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The script for a window of 1 s in `sub_windows` sub-windows and a limit
/// no call reaches. Returns the script and the policy's numbers its calls send.
fn layout_script(sub_windows: u64) -> (redis::Script, Vec<u8>) {
    let (source, policy) = redlimit::__private::sliding_window_source(1_000_000 / sub_windows, &[(1 << 40, 1_000_000)]);
    (redis::Script::new(&source), policy)
}
/// Keys (one per task, each with its own time line) in flight.
const KEYS: u64 = 8;
/// A fixed client time (2026-01-01), so every run writes the same sub-windows.
const T0: u64 = 1_767_225_600_000_000;

pub async fn sliding_window(admin: &mut MultiplexedConnection, con: &MultiplexedConnection, options: Options) {
    println!("\nsliding_window cost growth: {KEYS} keys, each call one sub-window later than its key's last, every sub-window of the window holding hits");
    println!("  {:<10} {:>12} {:>14} {:>12}", "layout", "sub-windows", "server µs/call", "calls/s");
    let layout = "ring";
    for sub_windows in [10u64, 100, 1000] {
        crate::flush(admin).await;
        let script = layout_script(sub_windows);
        let (us, rate) = steady_state(admin, con, &script, layout, sub_windows, options.run().window).await;
        println!("  {layout:<10} {sub_windows:>12} {us:>14.2} {rate:>12.0}");
        println!(
            "bench case=sliding_window_growth/{layout}/{sub_windows} server_us_per_call={us:.2} ops_per_s={rate:.0}"
        );
    }
}

/// Fills each key's window with one hit per sub-window, then calls it once
/// per sub-window for `window`: each call counts a full window, drops its
/// oldest sub-window and writes a new one.
async fn steady_state(
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    (script, policy): &(redis::Script, Vec<u8>),
    layout: &str,
    sub_windows: u64,
    window: Duration,
) -> (f64, f64) {
    let precision = 1_000_000 / sub_windows;
    let ready = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..KEYS {
        let (script, policy, mut con) = (script.clone(), policy.clone(), con.clone());
        let (ready, stop, measuring, calls) = (ready.clone(), stop.clone(), measuring.clone(), calls.clone());
        let key = format!("growth:{layout}:{sub_windows}:{task}");
        tasks.push(tokio::spawn(async move {
            for n in 0.. {
                if n == sub_windows {
                    ready.fetch_add(1, Ordering::SeqCst);
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let now = T0 + n * precision;
                // the policy, cost, peek, now and slack (a client clock).
                let reply: Vec<u8> = script
                    .key(&key)
                    .arg(&policy)
                    .arg(1)
                    .arg(0)
                    .arg(now)
                    .arg(60_000)
                    .invoke_async(&mut con)
                    .await
                    .expect("sliding_window EVALSHA");
                assert_eq!(window_numbers(&reply)[0], 1, "every call is admitted");
                if measuring.load(Ordering::Relaxed) {
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    while ready.load(Ordering::SeqCst) < KEYS as usize {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reset_stats(admin).await;
    let started = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(window).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let us = evalsha_stats(admin).await.usec_per_call;
    for task in tasks {
        task.await.expect("growth task");
    }
    (us, calls.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64())
}

/// `MEMORY USAGE` of one `sliding_log` key holding as many hits as its limit.
pub async fn sliding_log_memory(admin: &mut MultiplexedConnection, con: &MultiplexedConnection) {
    println!("\nsliding_log memory per key, filled to its limit (MEMORY USAGE, all entries sampled)");
    let mut con = con.clone();
    for limit in [10u64, 100, 1000, 10_000] {
        let policy = redlimit::Policy::sliding_log(&format!("{limit}/1h")).expect("a valid policy");
        let script = redis::Script::new(&redlimit::__private::script_source(&policy, false));
        let numbers = redlimit::__private::policy_argument(&policy, false);
        let key = format!("log-memory:{limit}");
        // One call per hit, each a microsecond apart: members "<time>:0".
        for j in 0..limit {
            let reply: Vec<u8> = script
                .key(&key)
                .arg(&numbers)
                .arg(1)
                .arg(0)
                .arg(T0 + j)
                .arg(60_000)
                .invoke_async(&mut con)
                .await
                .expect("sliding_log EVALSHA");
            assert_eq!(window_numbers(&reply)[0], 1);
        }
        let bytes: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(admin)
            .await
            .expect("MEMORY USAGE");
        println!(
            "  limit {limit:>6}: {bytes:>9} bytes per key, {:>6.1} bytes per admitted hit",
            bytes as f64 / limit as f64
        );
        println!("bench case=sliding_log_memory/{limit} bytes_per_key={bytes}");
    }
}
