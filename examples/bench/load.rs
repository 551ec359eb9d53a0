//! The load harness: N calls in flight for a measured window, with
//! throughput, latency percentiles, client CPU and the server's own time.

use redis::aio::MultiplexedConnection;
use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Calls in flight on the one multiplexed connection.
pub const IN_FLIGHT: usize = 64;
/// Users the load is spread over (each call picks the next one).
pub const USERS: u64 = 10_000;

const WARMING: u8 = 0;
const MEASURING: u8 = 1;
const STOPPED: u8 = 2;

/// What one case measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Measured {
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Client (this process) CPU time per decision, user + system.
    pub cpu_us_per_op: f64,
    /// `usec_per_call` of EVALSHA in `INFO commandstats` over the window.
    pub server_us_per_call: f64,
    /// EVALSHA calls the server counted over the window, per decision made.
    pub evalsha_per_op: f64,
}

/// The user a task's `n`-th call is for: each task walks the users from its
/// own starting point.
pub fn user(task: u64, n: u64) -> u64 {
    (task * (USERS / IN_FLIGHT as u64) + n) % USERS
}

/// Runs `call(task, n)` from [`IN_FLIGHT`] tasks (`n` counts each task's
/// calls) for `warmup`, then measures for `window`.
pub async fn drive<F, Fut>(admin: &mut MultiplexedConnection, warmup: Duration, window: Duration, call: F) -> Measured
where
    F: Fn(u64, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let phase = Arc::new(AtomicU8::new(WARMING));
    let mut tasks = Vec::with_capacity(IN_FLIGHT);
    for task in 0..IN_FLIGHT as u64 {
        let (phase, call) = (phase.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies_ns: Vec<u32> = Vec::with_capacity(1 << 16);
            for n in 0.. {
                let state = phase.load(Ordering::Relaxed);
                if state == STOPPED {
                    break;
                }
                let started = Instant::now();
                call(task, n).await;
                if state == MEASURING && phase.load(Ordering::Relaxed) == MEASURING {
                    latencies_ns.push(started.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                }
            }
            latencies_ns
        }));
    }
    tokio::time::sleep(warmup).await;
    reset_stats(admin).await;
    let cpu_before = cpu_time();
    let started = Instant::now();
    phase.store(MEASURING, Ordering::Relaxed);
    tokio::time::sleep(window).await;
    phase.store(STOPPED, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_before);
    let (server_us_per_call, evalsha_calls) = evalsha_stats(admin).await;

    let mut all: Vec<u32> = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a load task panicked"));
    }
    let ops = all.len() as f64;
    all.sort_unstable();
    Measured {
        ops_per_s: ops / elapsed.as_secs_f64(),
        p50_us: percentile(&all, 0.50),
        p99_us: percentile(&all, 0.99),
        cpu_us_per_op: cpu.as_secs_f64() * 1e6 / ops.max(1.0),
        server_us_per_call,
        evalsha_per_op: evalsha_calls as f64 / ops.max(1.0),
    }
}

fn percentile(sorted_ns: &[u32], q: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let index = ((sorted_ns.len() as f64 - 1.0) * q).round() as usize;
    f64::from(sorted_ns[index]) / 1000.0
}

/// This process's CPU time (user + system, every thread) from /proc/self/stat.
pub fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line: 11 and 12 after ')'.
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / clock_ticks_per_second())
}

fn clock_ticks_per_second() -> u64 {
    static HZ: once_cell::sync::OnceCell<u64> = once_cell::sync::OnceCell::new();
    // USER_HZ: 100 on every Linux this runs on, as `getconf CLK_TCK` says.
    *HZ.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// `CONFIG RESETSTAT` on the bench's own server.
pub async fn reset_stats(admin: &mut MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(admin).await.expect("CONFIG RESETSTAT");
}

/// EVALSHA's `usec_per_call` and `calls` since the last reset.
pub async fn evalsha_stats(admin: &mut MultiplexedConnection) -> (f64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(admin).await.expect("INFO commandstats");
    let Some(line) = info.lines().find(|l| l.starts_with("cmdstat_evalsha:")) else { return (0.0, 0) };
    let field =
        |name: &str| line.split(&[':', ','][..]).find_map(|kv| kv.strip_prefix(name)).unwrap_or("0").to_string();
    (field("usec_per_call=").parse().unwrap_or(0.0), field("calls=").parse().unwrap_or(0))
}
