//! Exactness across processes: worker processes share keys on one Redis,
//! and their admitted calls are replayed against each policy's definition:
//! did any window or bucket ever admit more than the policy allows?
//!
//! Each checker takes one key's admitted calls as `(decided_at_us, cost)`,
//! in any order, and returns how many admissions broke the policy (0 when
//! exact). They follow DESIGN.md's definitions, not the implementation.
//!
//! [`Worker`] is one worker process's part, [`run`] starts the processes
//! and replays what they admitted. The `redis_exactness` test bounds each
//! worker by a count of calls; the `exactness` example, a manual tool, may
//! bound them by time instead.

use ratelimit::{Limiter, Policy, RedisOptions, Store};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// Every algorithm, in the order runs report them.
pub const ALGORITHMS: [&str; 6] =
    ["fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"];

/// Keys every task of every worker takes turns on, so all contend on each.
pub const KEYS: usize = 4;

/// Set on a worker process to what it must do (see [`Worker::from_env`]).
pub const WORKER_VAR: &str = "RATELIMIT_EXACTNESS_WORKER";

/// The policy under test for `algo`: windows of tens of ms, so that even a
/// short, fast run sees many of them pass (and buckets refill).
pub fn policy(algo: &str) -> Policy {
    match algo {
        "fixed_window" => Policy::fixed_window("10/20ms,40/200ms"),
        "sliding_window" => Policy::sliding_window("10/20ms", "2ms"),
        "sliding_log" => Policy::sliding_log("10/20ms,40/200ms"),
        "token_bucket" => Policy::token_bucket(10, "500/1s"),
        "leaky_bucket" => Policy::leaky_bucket(10, "500/1s"),
        "gcra" => Policy::gcra("500/1s", 9),
        other => panic!("unknown algorithm {other}"),
    }
    .unwrap()
}

/// Over-admissions of one key's admitted calls under [`policy`]`(algo)`.
pub fn over_admissions(algo: &str, hits: &[(u64, u64)]) -> usize {
    match algo {
        "fixed_window" => fixed_window(hits, 10, 20_000) + fixed_window(hits, 40, 200_000),
        "sliding_window" => sliding_window(hits, 10, 20_000, 2_000),
        "sliding_log" => sliding_log(hits, 10, 20_000) + sliding_log(hits, 40, 200_000),
        "token_bucket" => token_bucket(hits, 10, 500, 1_000_000),
        "leaky_bucket" => leaky_bucket(hits, 10, 500, 1_000_000),
        "gcra" => gcra(hits, 9, 500, 1_000_000),
        other => panic!("unknown algorithm {other}"),
    }
}

/// How long each task of a worker keeps deciding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Exactly this many calls per task: what a test asserts on.
    Calls(u64),
    /// As many calls as fit in this time: a throughput figure, for the example.
    For(Duration),
}

/// One worker process: `tasks` tasks on one multiplexed connection to `url`,
/// all on [`KEYS`] keys of `algo`'s limiter, every decision made by Redis
/// (no deny cache).
#[derive(Clone, Debug)]
pub struct Worker {
    pub url: String,
    pub algo: String,
    pub tasks: u64,
    pub bound: Bound,
}

impl Worker {
    /// `command` (this program again, usually) set up to run as this worker,
    /// with its stdout piped for [`run`].
    pub fn command(&self, mut command: Command) -> Command {
        let bound = match self.bound {
            Bound::Calls(n) => format!("calls:{n}"),
            Bound::For(d) => format!("ms:{}", d.as_millis()),
        };
        command.env(WORKER_VAR, format!("{} {} {} {bound}", self.url, self.algo, self.tasks)).stdout(Stdio::piped());
        command
    }

    /// The worker this process must be, when [`WORKER_VAR`] is set.
    pub fn from_env() -> Option<Worker> {
        let spec = std::env::var(WORKER_VAR).ok()?;
        let fields: Vec<&str> = spec.split(' ').collect();
        let [url, algo, tasks, bound] = fields[..] else { panic!("{WORKER_VAR}={spec:?}: expected 4 fields") };
        let bound = match bound.split_once(':') {
            Some(("calls", n)) => Bound::Calls(n.parse().unwrap()),
            Some(("ms", n)) => Bound::For(Duration::from_millis(n.parse().unwrap())),
            _ => panic!("{WORKER_VAR}={spec:?}: bad bound {bound:?}"),
        };
        Some(Worker { url: url.into(), algo: algo.into(), tasks: tasks.parse().unwrap(), bound })
    }

    /// Decides, then writes `exactness admit <key> <decided_at_us>` per
    /// admitted call and `exactness decisions <n>` to stdout.
    pub async fn run(&self) {
        // Calls queue behind 100 tasks on a loaded machine: give them time
        // rather than count timeouts (a timed-out call may have been
        // admitted unseen).
        let options = RedisOptions { response_timeout: Duration::from_secs(10), ..RedisOptions::default() };
        let store = Store::redis_with(&self.url, options).await.expect("worker connects");
        // The deny cache would answer most denials in process; its own
        // exactness is tested in tests/limiter_deny_cache.rs.
        let limiter =
            Limiter::new(format!("exactness-{}", self.algo), policy(&self.algo), &store).with_deny_cache(false);
        let end = match self.bound {
            Bound::For(d) => Some(Instant::now() + d),
            Bound::Calls(_) => None,
        };
        let handles: Vec<_> = (0..self.tasks)
            .map(|task| {
                let (limiter, bound) = (limiter.clone(), self.bound);
                tokio::spawn(async move {
                    let (mut admitted, mut decisions) = (Vec::new(), 0u64);
                    let mut i = task as usize;
                    loop {
                        let more = match bound {
                            Bound::Calls(n) => decisions < n,
                            Bound::For(_) => Instant::now() < end.unwrap(),
                        };
                        if !more {
                            break;
                        }
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
                writeln!(out, "exactness admit {key} {t}").unwrap();
            }
        }
        writeln!(out, "exactness decisions {total}").unwrap();
    }
}

/// What the workers of one [`run`] did.
#[derive(Debug)]
pub struct Outcome {
    /// Decisions made by each worker, in the order started.
    pub per_worker: Vec<u64>,
    /// Admitted calls, all keys.
    pub admitted: usize,
    /// Admissions beyond the policy's definition, all keys.
    pub over: usize,
    /// Redis time from the first admitted call to the last.
    pub span: Duration,
}

impl Outcome {
    /// Decisions made by all workers.
    pub fn decisions(&self) -> u64 {
        self.per_worker.iter().sum()
    }
}

/// Starts every worker command (see [`Worker::command`]), waits for them and
/// replays their admitted calls against `algo`'s policy.
///
/// # Panics
/// When a worker cannot start, fails, or prints something unexpected.
pub fn run(algo: &str, workers: Vec<Command>) -> Outcome {
    let children: Vec<_> = workers
        .into_iter()
        .map(|mut command| command.stderr(Stdio::piped()).spawn().expect("start a worker process"))
        .collect();
    let mut per_key: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    let mut per_worker = Vec::new();
    for child in children {
        let mut child = child;
        let mut decisions = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["exactness", "admit", key, t] => {
                    per_key.entry(key.parse().unwrap()).or_default().push((t.parse().unwrap(), 1))
                }
                ["exactness", "decisions", n] => decisions = Some(n.parse::<u64>().unwrap()),
                ["exactness", ..] => panic!("unexpected worker output: {line}"),
                // The test harness's own lines, when the worker is a test binary.
                _ => {}
            }
        }
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a worker failed: {}", String::from_utf8_lossy(&output.stderr));
        per_worker.push(decisions.expect("the worker reports its decisions"));
    }
    let times = per_key.values().flatten().map(|&(t, _)| t);
    let span = times.clone().max().unwrap_or(0) - times.min().unwrap_or(0);
    Outcome {
        per_worker,
        admitted: per_key.values().map(Vec::len).sum(),
        over: per_key.values().map(|hits| over_admissions(algo, hits)).sum(),
        span: Duration::from_micros(span),
    }
}

/// Sorted by time; ties keep their order.
fn sorted(hits: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut hits = hits.to_vec();
    hits.sort_by_key(|&(t, _)| t);
    hits
}

/// Fixed window: a window starts at the first admitted hit after the
/// previous one ended and lasts `window_us`; at most `limit` per window.
pub fn fixed_window(hits: &[(u64, u64)], limit: u64, window_us: u64) -> usize {
    let mut start: Option<u64> = None;
    let mut count = 0;
    let mut broken = 0;
    for (t, cost) in sorted(hits) {
        match start {
            Some(s) if t - s < window_us => count += cost,
            _ => (start, count) = (Some(t), cost),
        }
        broken += usize::from(count > limit);
    }
    broken
}

/// Sliding log: every half-open window `(t - W, t]` holds at most `limit`.
pub fn sliding_log(hits: &[(u64, u64)], limit: u64, window_us: u64) -> usize {
    let hits = sorted(hits);
    let (mut first, mut sum, mut broken) = (0, 0, 0);
    for j in 0..hits.len() {
        sum += hits[j].1;
        while hits[first].0 + window_us <= hits[j].0 {
            sum -= hits[first].1;
            first += 1;
        }
        broken += usize::from(sum > limit);
    }
    broken
}

/// Sliding window over sub-windows of `precision_us`: every run of
/// `window / precision` consecutive aligned sub-windows holds at most
/// `limit`. (Any unaligned window of length W spans one sub-window more,
/// which is the documented approximation.)
pub fn sliding_window(hits: &[(u64, u64)], limit: u64, window_us: u64, precision_us: u64) -> usize {
    let span = window_us / precision_us;
    let mut per_sub: Vec<(u64, u64)> = Vec::new();
    for (t, cost) in sorted(hits) {
        let k = t / precision_us;
        match per_sub.last_mut() {
            Some((last, sum)) if *last == k => *sum += cost,
            _ => per_sub.push((k, cost)),
        }
    }
    let as_hits: Vec<(u64, u64)> = per_sub.iter().map(|&(k, sum)| (k, sum)).collect();
    // A run of `span` sub-windows is a sliding log over sub-window indexes.
    sliding_log(&as_hits, limit, span)
}

/// Token bucket of `capacity` refilled at `count` per `period_us`, starting
/// full: the tokens taken never exceed what was there.
pub fn token_bucket(hits: &[(u64, u64)], capacity: u64, count: u64, period_us: u64) -> usize {
    // Units: one token is `period_us` units; `count` units arrive per µs.
    let full = (capacity as u128) * period_us as u128;
    let (mut units, mut last, mut broken) = (full, None::<u64>, 0);
    for (t, cost) in sorted(hits) {
        if let Some(last) = last {
            units = (units + (t - last) as u128 * count as u128).min(full);
        }
        last = Some(t);
        let need = cost as u128 * period_us as u128;
        if need > units {
            broken += 1;
            units = 0;
        } else {
            units -= need;
        }
    }
    broken
}

/// Leaky bucket of `capacity` drained at `count` per `period_us`, starting
/// empty: the level never rises above the capacity.
pub fn leaky_bucket(hits: &[(u64, u64)], capacity: u64, count: u64, period_us: u64) -> usize {
    // Draining a level is refilling the room left: the same bookkeeping.
    token_bucket(hits, capacity, count, period_us)
}

/// GCRA with `burst`: at most `burst + 1` at once, then `count` per
/// `period_us`; the same limit as a token bucket of `burst + 1`.
pub fn gcra(hits: &[(u64, u64)], burst: u64, count: u64, period_us: u64) -> usize {
    token_bucket(hits, burst + 1, count, period_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(times_us: &[u64]) -> Vec<(u64, u64)> {
        times_us.iter().map(|&t| (t, 1)).collect()
    }

    #[test]
    fn fixed_window_catches_a_third_hit_in_one_window() {
        assert_eq!(fixed_window(&at(&[0, 5, 10, 15]), 2, 10), 0);
        assert_eq!(fixed_window(&at(&[0, 5, 9]), 2, 10), 1);
    }

    #[test]
    fn sliding_log_catches_crowded_windows_at_any_offset() {
        assert_eq!(sliding_log(&at(&[0, 10, 20, 30]), 1, 10), 0);
        assert_eq!(sliding_log(&at(&[0, 10, 19, 30]), 1, 10), 1);
        assert_eq!(sliding_log(&at(&[30, 0, 5]), 2, 10), 0, "order does not matter");
    }

    #[test]
    fn sliding_window_counts_aligned_runs_of_sub_windows() {
        // Window 20, precision 10: two sub-windows per run.
        assert_eq!(sliding_window(&at(&[0, 9, 15]), 2, 20, 10), 1);
        assert_eq!(sliding_window(&at(&[0, 9, 25]), 2, 20, 10), 0, "sub-windows 0 and 2 are not in one run");
        assert_eq!(sliding_window(&at(&[0, 9, 20, 29]), 2, 20, 10), 0);
    }

    #[test]
    fn buckets_catch_taking_faster_than_the_rate() {
        // Capacity 2, 1 token per 10 µs.
        assert_eq!(token_bucket(&at(&[0, 0, 10, 20]), 2, 1, 10), 0);
        assert_eq!(token_bucket(&at(&[0, 0, 9]), 2, 1, 10), 1);
        assert_eq!(leaky_bucket(&at(&[0, 0, 0]), 2, 1, 10), 1);
        assert_eq!(gcra(&at(&[0, 0, 10]), 1, 1, 10), 0);
        assert_eq!(gcra(&at(&[0, 0, 5]), 1, 1, 10), 1);
    }
}
