//! The load harness: N calls in flight for a measured window, with
//! throughput, latency percentiles, client CPU and the server's own time.

use redis::aio::MultiplexedConnection;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Calls in flight on the one multiplexed connection, unless a case asks
/// for another number (the batching section runs several).
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
    /// EVALSHA's total `usec` over the window ÷ the decisions made: the
    /// same as `server_us_per_call` while each call decides one, and the
    /// Redis time a decision costs when a batched call decides several.
    pub server_us_per_decision: f64,
    /// redis-server's own CPU time (user + system, `INFO cpu`) over the
    /// window ÷ the decisions made: all it spent, reading requests and
    /// writing replies included, which EVALSHA's `usec` leaves out.
    pub server_cpu_us_per_op: f64,
    /// EVALSHA calls the server counted over the window, per decision made.
    pub evalsha_per_op: f64,
}

/// The user a task's `n`-th call is for, with [`IN_FLIGHT`] tasks.
pub fn user(task: u64, n: u64) -> u64 {
    user_among(task, n, IN_FLIGHT)
}

/// The user a task's `n`-th call is for, with `in_flight` tasks: each task
/// walks the users from its own starting point, spaced evenly, so calls in
/// flight at the same time are for distinct users.
pub fn user_among(task: u64, n: u64, in_flight: usize) -> u64 {
    (task * (USERS / in_flight.max(1) as u64) + n) % USERS
}

/// Runs `call(task, n)` from `in_flight` tasks (`n` counts each task's
/// calls; [`IN_FLIGHT`] unless a case says otherwise) for `warmup`, then
/// measures for `window`.
pub async fn drive<F, Fut>(
    admin: &mut MultiplexedConnection,
    in_flight: usize,
    warmup: Duration,
    window: Duration,
    call: F,
) -> Measured
where
    F: Fn(u64, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let phase = Arc::new(AtomicU8::new(WARMING));
    let mut tasks = Vec::with_capacity(in_flight);
    // Room for the latencies of a measured run without regrowing, shared
    // out among the tasks.
    let capacity = ((1 << 22) / in_flight.max(1)).clamp(1 << 12, 1 << 16);
    for task in 0..in_flight as u64 {
        let (phase, call) = (phase.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies_ns: Vec<u32> = Vec::with_capacity(capacity);
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
    let server_cpu_before = server_cpu(admin).await;
    let cpu_before = cpu_time();
    let started = Instant::now();
    phase.store(MEASURING, Ordering::Relaxed);
    tokio::time::sleep(window).await;
    phase.store(STOPPED, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_before);
    let server_cpu = server_cpu(admin).await.saturating_sub(server_cpu_before);
    let evalsha = evalsha_stats(admin).await;

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
        server_us_per_call: evalsha.usec_per_call,
        server_us_per_decision: evalsha.usec as f64 / ops.max(1.0),
        server_cpu_us_per_op: server_cpu.as_secs_f64() * 1e6 / ops.max(1.0),
        evalsha_per_op: evalsha.calls as f64 / ops.max(1.0),
    }
}

/// Runs each of `cases` cases (`measure(i)`) once per round, in turn, every
/// other round in reverse, so a drift in the machine's load hits each case
/// alike: each case's runs.
pub async fn in_turn(cases: usize, rounds: u32, mut measure: impl AsyncFnMut(usize) -> Measured) -> Vec<Vec<Measured>> {
    let mut runs = vec![Vec::new(); cases];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..cases).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            runs[i].push(measure(i).await);
        }
    }
    runs
}

/// How a case's decisions were answered: a case whose calls failed, or were
/// mostly denied, measured something else than the admitting path.
#[derive(Debug, Default)]
pub struct Tally {
    admitted: AtomicU64,
    denied: AtomicU64,
    failed: AtomicU64,
    /// The first failure, to say what went wrong.
    first_failure: std::sync::OnceLock<String>,
}

impl Tally {
    /// One decision's `reply`, read as admitted, denied, or `None`: an
    /// error or a reply of another shape.
    pub fn count(&self, reply: &redis::Value, admitted: Option<bool>) {
        match admitted {
            Some(true) => _ = self.admitted.fetch_add(1, Ordering::Relaxed),
            Some(false) => _ = self.denied.fetch_add(1, Ordering::Relaxed),
            None => self.fail(1, reply),
        }
    }

    /// `decisions` that failed together (a script call or a pipeline that erred), for `why`.
    pub fn fail(&self, decisions: usize, why: &dyn std::fmt::Debug) {
        self.failed.fetch_add(decisions as u64, Ordering::Relaxed);
        self.first_failure.get_or_init(|| format!("{why:?}"));
    }

    pub fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Why the case's figures must not count, if they must not: a failed
    /// decision, or more than 1 % denied (the load is meant to be admitted).
    pub fn fault(&self) -> Option<String> {
        let (admitted, denied, failed) = (self.admitted(), self.denied.load(Ordering::Relaxed), self.failed());
        let all = admitted + denied + failed;
        (failed > 0 || denied * 100 > all || all == 0).then(|| {
            let first = self.first_failure.get().map_or(String::new(), |why| format!(" (the first: {why})"));
            format!("{failed} failed{first} and {denied} denied of {all} decisions")
        })
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

/// redis-server's CPU time so far (`used_cpu_user` + `used_cpu_sys` of `INFO cpu`).
pub async fn server_cpu(admin: &mut MultiplexedConnection) -> Duration {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(admin).await.expect("INFO cpu");
    let seconds = |name: &str| {
        info.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(0.0)
    };
    Duration::from_secs_f64(seconds("used_cpu_user:") + seconds("used_cpu_sys:"))
}

/// EVALSHA's line of `INFO commandstats` since the last reset.
#[derive(Debug, Clone, Copy, Default)]
pub struct Evalsha {
    /// Script calls (a batched call counts once, however many it decides).
    pub calls: u64,
    /// Total time spent in them, µs.
    pub usec: u64,
    /// `usec / calls`.
    pub usec_per_call: f64,
}

/// EVALSHA's `calls`, `usec` and `usec_per_call` since the last reset.
pub async fn evalsha_stats(admin: &mut MultiplexedConnection) -> Evalsha {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(admin).await.expect("INFO commandstats");
    let Some(line) = info.lines().find(|l| l.starts_with("cmdstat_evalsha:")) else { return Evalsha::default() };
    let field =
        |name: &str| line.split(&[':', ','][..]).find_map(|kv| kv.strip_prefix(name)).unwrap_or("0").to_string();
    Evalsha {
        calls: field("calls=").parse().unwrap_or(0),
        usec: field("usec=").parse().unwrap_or(0),
        usec_per_call: field("usec_per_call=").parse().unwrap_or(0.0),
    }
}
