//! Exactness across processes: worker processes share keys on one Redis,
//! and their admitted calls are replayed against each policy's definition
//! ([`checks`]): did any window or bucket ever admit more than the policy
//! allows?
//!
//! [`Worker`] is one worker process's part, [`run`] starts the processes
//! and replays what they admitted. The `redis_exactness` and
//! `redis_client_clock_exactness` tests bound each worker by a count of
//! calls; the `exactness` example, a manual tool, may bound them by time
//! instead. [`in_memory`] is the same load on the memory store, in tasks
//! of this process.

pub mod checks;

pub use checks::{fixed_window, gcra, leaky_bucket, sliding_log, sliding_window, token_bucket};

use redlimit::{Limiter, Policy, RedisOptions, Store, SystemClock};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// Every algorithm, in the order runs report them.
pub const ALGORITHMS: [&str; 6] =
    ["fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"];

/// Keys every task of every worker takes turns on, so all contend on each
/// (on Redis's clock; on a client's, every task shares one key).
pub const KEYS: usize = 4;

/// Set on a worker process to what it must do (see [`Worker::from_env`]).
pub const WORKER_VAR: &str = "REDLIMIT_EXACTNESS_WORKER";

/// Whose clock dates the calls of a run, and so its policies and keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// Redis's own (no time sent): [`policy`], on [`KEYS`] keys.
    Server,
    /// Each process's wall clock ([`SystemClock`]) sent with every call:
    /// [`client_clock_policy`], every task on one key, so calls stamped in
    /// one order often reach the store in another.
    Client,
}

impl Timing {
    /// The policy under test for `algo`.
    pub fn policy(self, algo: &str) -> Policy {
        match self {
            Timing::Server => policy(algo),
            Timing::Client => client_clock_policy(algo),
        }
    }

    /// Keys the tasks take turns on.
    pub fn keys(self) -> usize {
        match self {
            Timing::Server => KEYS,
            Timing::Client => 1,
        }
    }

    /// Over-admissions of one key's admitted calls under [`Timing::policy`].
    pub fn over_admissions(self, algo: &str, hits: &[(u64, u64)]) -> usize {
        match self {
            Timing::Server => over_admissions(algo, hits),
            Timing::Client => client_clock_over_admissions(algo, hits),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Timing::Server => "server",
            Timing::Client => "client",
        }
    }
}

/// The policy under test for `algo` on Redis's clock: windows of tens of
/// ms, so that even a short, fast run sees many of them pass (and buckets
/// refill).
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

/// The policy under test for `algo` on a client clock: 50 per 100 ms, the
/// load with which late arrivals once reopened capacity.
pub fn client_clock_policy(algo: &str) -> Policy {
    match algo {
        "fixed_window" => Policy::fixed_window("50/100ms"),
        "sliding_window" => Policy::sliding_window("50/100ms", "10ms"),
        "sliding_log" => Policy::sliding_log("50/100ms"),
        "token_bucket" => Policy::token_bucket(50, "500/1s"),
        "leaky_bucket" => Policy::leaky_bucket(50, "500/1s"),
        "gcra" => Policy::gcra("500/1s", 49),
        other => panic!("unknown algorithm {other}"),
    }
    .unwrap()
}

/// Over-admissions of one key's admitted calls under [`client_clock_policy`]`(algo)`.
pub fn client_clock_over_admissions(algo: &str, hits: &[(u64, u64)]) -> usize {
    match algo {
        "fixed_window" => fixed_window(hits, 50, 100_000),
        "sliding_window" => sliding_window(hits, 50, 100_000, 10_000),
        "sliding_log" => sliding_log(hits, 50, 100_000),
        "token_bucket" => token_bucket(hits, 50, 500, 1_000_000),
        "leaky_bucket" => leaky_bucket(hits, 50, 500, 1_000_000),
        "gcra" => gcra(hits, 49, 500, 1_000_000),
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
/// all on the keys of `algo`'s limiter, every decision made by Redis (no
/// deny cache), dated by `timing`'s clock.
#[derive(Clone, Debug)]
pub struct Worker {
    pub url: String,
    pub algo: String,
    pub tasks: u64,
    pub bound: Bound,
    pub timing: Timing,
}

impl Worker {
    /// `command` (this program again, usually) set up to run as this worker,
    /// with its stdout piped for [`run`].
    pub fn command(&self, mut command: Command) -> Command {
        let bound = match self.bound {
            Bound::Calls(n) => format!("calls:{n}"),
            Bound::For(d) => format!("ms:{}", d.as_millis()),
        };
        let spec = format!("{} {} {} {bound} {}", self.url, self.algo, self.tasks, self.timing.name());
        command.env(WORKER_VAR, spec).stdout(Stdio::piped());
        command
    }

    /// `processes` copies of this test binary, each running only its
    /// `exactness_worker` test as this worker.
    pub fn test_processes(&self, processes: usize) -> Vec<Command> {
        let exe = std::env::current_exe().expect("the test binary's path");
        (0..processes)
            .map(|_| {
                let mut command = Command::new(&exe);
                command.args(["--exact", "exactness_worker", "--nocapture", "--quiet"]);
                self.command(command)
            })
            .collect()
    }

    /// The worker this process must be, when [`WORKER_VAR`] is set.
    pub fn from_env() -> Option<Worker> {
        let spec = std::env::var(WORKER_VAR).ok()?;
        let fields: Vec<&str> = spec.split(' ').collect();
        let [url, algo, tasks, bound, timing] = fields[..] else { panic!("{WORKER_VAR}={spec:?}: expected 5 fields") };
        let bound = match bound.split_once(':') {
            Some(("calls", n)) => Bound::Calls(n.parse().unwrap()),
            Some(("ms", n)) => Bound::For(Duration::from_millis(n.parse().unwrap())),
            _ => panic!("{WORKER_VAR}={spec:?}: bad bound {bound:?}"),
        };
        let timing = match timing {
            "server" => Timing::Server,
            "client" => Timing::Client,
            _ => panic!("{WORKER_VAR}={spec:?}: bad timing {timing:?}"),
        };
        Some(Worker { url: url.into(), algo: algo.into(), tasks: tasks.parse().unwrap(), bound, timing })
    }

    /// Decides, then writes `exactness admit <key> <decided_at_us>` per
    /// admitted call and `exactness decisions <n>` to stdout.
    pub async fn run(&self) {
        // Calls queue behind 100 tasks on a loaded machine: give them time
        // rather than count timeouts (a timed-out call may have been
        // admitted unseen).
        let options = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
        let mut store = Store::redis_with(&self.url, options).await.expect("worker connects");
        if self.timing == Timing::Client {
            store = store.with_clock(SystemClock);
        }
        // The deny cache would answer most denials in process; its own
        // exactness is tested in tests/limiter_deny_cache.rs.
        let name = format!("exactness-{}-{}", self.timing.name(), self.algo);
        let limiter = Limiter::new(name, self.timing.policy(&self.algo), &store).with_deny_cache(false);
        let (admitted, total) = decide_all(&limiter, self.tasks, self.bound, self.timing.keys(), None).await;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for (key, t) in admitted {
            writeln!(out, "exactness admit {key} {t}").unwrap();
        }
        writeln!(out, "exactness decisions {total}").unwrap();
    }
}

/// `tasks` tasks deciding on `limiter` until `bound`, each taking turns on
/// `keys` keys and pausing `pause` after each call: the admitted calls as
/// `(key, decided_at_us)`, and the decisions made.
async fn decide_all(
    limiter: &Limiter,
    tasks: u64,
    bound: Bound,
    keys: usize,
    pause: Option<Duration>,
) -> (Vec<(usize, u64)>, u64) {
    let end = match bound {
        Bound::For(d) => Some(Instant::now() + d),
        Bound::Calls(_) => None,
    };
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let limiter = limiter.clone();
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
                    let key = i % keys;
                    i += 1;
                    let d = limiter.check(format!("key-{key}"), 1).await.expect("the store decides");
                    decisions += 1;
                    if d.allowed {
                        admitted.push((key, d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64));
                    }
                    if let Some(pause) = pause {
                        tokio::time::sleep(pause).await;
                    }
                }
                (admitted, decisions)
            })
        })
        .collect();
    let (mut all, mut total) = (Vec::new(), 0);
    for handle in handles {
        let (admitted, decisions) = handle.await.unwrap();
        total += decisions;
        all.extend(admitted);
    }
    (all, total)
}

/// [`Timing::Client`]'s load on the memory store: `tasks` tasks of this
/// process (run it on a multi-thread runtime) make `calls` calls each on
/// one key, dated by [`SystemClock`], pausing a millisecond after each so
/// the run spans several windows; their admitted calls replayed.
pub async fn in_memory(algo: &str, tasks: u64, calls: u64) -> Outcome {
    let store = Store::memory().with_clock(SystemClock);
    let limiter = Limiter::new(format!("exactness-{algo}"), client_clock_policy(algo), &store);
    let pause = Some(Duration::from_millis(1));
    let (admitted, total) = decide_all(&limiter, tasks, Bound::Calls(calls), 1, pause).await;
    let hits: Vec<(u64, u64)> = admitted.iter().map(|&(_, t)| (t, 1)).collect();
    let times = hits.iter().map(|&(t, _)| t);
    let span = times.clone().max().unwrap_or(0) - times.min().unwrap_or(0);
    Outcome {
        per_worker: vec![total],
        admitted: hits.len(),
        over: client_clock_over_admissions(algo, &hits),
        span: Duration::from_micros(span),
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
    run_on(Timing::Server, algo, workers)
}

/// [`run`] for workers of `timing`.
///
/// # Panics
/// When a worker cannot start, fails, or prints something unexpected.
pub fn run_on(timing: Timing, algo: &str, workers: Vec<Command>) -> Outcome {
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
        over: per_key.values().map(|hits| timing.over_admissions(algo, hits)).sum(),
        span: Duration::from_micros(span),
    }
}
