//! Redis's CPU per decision of this project's scripts against the peers' own,
//! per algorithm: ours one decision per `EVALSHA` and in the runtime's batch
//! of 16 (every key declared), each peer's script as its project sends it,
//! one per `EVALSHA` and pipelined 16 deep, and redis-cell's `CL.THROTTLE`,
//! the bench's common yardstick, one and pipelined. All run in turn in every
//! round on one redis-server of the bench's own, with `--only cell`'s load.
//!
//! The peers' scripts, their licenses and the KEYS/ARGV each takes for the
//! bench's policy are in `../shared/bench/peers/` next to the repository (or
//! the folder `REDLIMIT_BENCH_PEERS` names), read at run time: they are not
//! part of the project. Without them the section says so in one line.
//!
//! A case is timed only if it holds the bench's policy (of 2,400 calls at
//! once on one fresh user it admits about 1,000, up to 2,000 where a window
//! or a whole-second refill turns meanwhile), and it is compared only if its
//! timed calls neither failed nor were mostly denied.

use crate::cell::{self, BATCH};
use crate::load::{self, drive, in_turn, Measured, Tally};
use crate::{flush, median_cpu_ratio, raw_connection, Options};
use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::Value;
use redlimit::AlgorithmKind;
use redlimit_test_support::redis_server::RedisServer;
use std::path::PathBuf;
use std::sync::Arc;

/// Calls on one fresh user in the check that a case holds the policy.
const CHECK_CALLS: u64 = 2_400;

/// A peer's script and how its project calls it for the bench's policy
/// (1000 per 1 s, a capacity or burst of 1000, one permit per call).
#[derive(Clone, Copy)]
struct Peer {
    kind: AlgorithmKind,
    /// The project, as the case is named.
    name: &'static str,
    /// The script, in the peers' folder.
    file: &'static str,
    /// KEYS and ARGV of user `u`'s call at the client's time (µs since the epoch).
    call: fn(u64, u64) -> (Vec<String>, Vec<String>),
    /// Whether a reply admits the call; `None` for an error or another shape.
    admitted: fn(&Value) -> Option<bool>,
}

/// ARGV as the peer's client writes it.
fn args(values: &[&dyn std::fmt::Display]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

/// limits names a key by its limit: `LIMITER/<identifier>/<amount>/<multiples>/<granularity>`.
fn limits_key(u: u64) -> String {
    format!("LIMITER/u{u}/1000/1/second")
}

fn int(reply: &Value) -> Option<i64> {
    match reply {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn first(reply: &Value) -> Option<&Value> {
    match reply {
        Value::Array(values) => values.first(),
        _ => None,
    }
}

/// A Lua boolean as Redis replies it: true is 1, false is nil.
fn boolean(reply: &Value) -> Option<bool> {
    match reply {
        Value::Int(1) => Some(true),
        Value::Nil => Some(false),
        _ => None,
    }
}

/// Every peer's script, by algorithm, with the arguments its README (in the
/// peers' folder) read off the project's own calling code.
fn peers() -> Vec<Peer> {
    use AlgorithmKind::*;
    vec![
        Peer {
            kind: FixedWindow,
            name: "limits",
            file: "limits/incr_expire.lua",
            call: |u, _| (vec![format!("LIMITS:{}", limits_key(u))], args(&[&1, &1])),
            // The count.
            admitted: |r| int(r).map(|count| count <= 1000),
        },
        Peer {
            kind: FixedWindow,
            name: "upstash",
            file: "upstash-ratelimit/fixedWindowLimitScript.lua",
            // The window's number, by the client's clock, is in the key.
            call: |u, now| {
                (vec![format!("@upstash/ratelimit:u{u}:{}", now / 1_000_000), String::new()], args(&[&1000, &1000, &1]))
            },
            // The count, then the limit.
            admitted: |r| Some(int(first(r)?)? <= 1000),
        },
        Peer {
            kind: FixedWindow,
            name: "go-zero",
            file: "go-zero/periodscript.lua",
            call: |u, _| (vec![format!("periodlimit:u{u}")], args(&[&1000, &1])),
            // 1 allowed, 2 allowed as the quota's last, 0 over the quota.
            admitted: |r| int(r).filter(|v| (0..=2).contains(v)).map(|v| v > 0),
        },
        Peer {
            kind: SlidingWindow,
            name: "limits",
            file: "limits/acquire_sliding_window.lua",
            call: |u, _| {
                let key = limits_key(u);
                (vec![format!("LIMITS:{{{key}}}/-1"), format!("LIMITS:{{{key}}}")], args(&[&1000, &1, &1]))
            },
            admitted: boolean,
        },
        Peer {
            kind: SlidingWindow,
            name: "upstash",
            file: "upstash-ratelimit/slidingWindowLimitScript.lua",
            call: |u, now| {
                let (ms, window) = (now / 1000, now / 1_000_000);
                let key = |w: u64| format!("@upstash/ratelimit:u{u}:{w}");
                (vec![key(window), key(window - 1), String::new()], args(&[&1000, &ms, &1000, &1]))
            },
            // What remains, -1 when denied.
            admitted: |r| Some(int(first(r)?)? >= 0),
        },
        Peer {
            kind: SlidingWindow,
            name: "throttled-py",
            file: "throttled-py/sliding_window.lua",
            call: |u, now| {
                let (ms, period) = (now / 1000, now / 1_000_000);
                let key = |p: u64| format!("throttled:v1:sliding_window:u{u}:period:{p}");
                (vec![key(period), key(period - 1)], args(&[&1, &1000, &1, &ms]))
            },
            // Whether it was limited.
            admitted: |r| boolean(first(r)?).map(|limited| !limited),
        },
        Peer {
            kind: SlidingLog,
            name: "limits",
            file: "limits/acquire_moving_window.lua",
            // The client's time in seconds, as Python's float `time.time()`.
            call: |u, now| (vec![format!("LIMITS:{}", limits_key(u))], args(&[&(now as f64 / 1e6), &1000, &1, &1])),
            admitted: boolean,
        },
        Peer {
            kind: TokenBucket,
            name: "upstash",
            file: "upstash-ratelimit/tokenBucketLimitScript.lua",
            call: |u, now| {
                (
                    vec![format!("@upstash/ratelimit:u{u}"), String::new()],
                    args(&[&1000, &1000, &1000, &(now / 1000), &1]),
                )
            },
            // What remains, -1 when denied.
            admitted: |r| Some(int(first(r)?)? >= 0),
        },
        Peer {
            kind: TokenBucket,
            name: "throttled-py",
            file: "throttled-py/token_bucket.lua",
            // redis-py writes the float rate 1000.0 as `1000.0`.
            call: |u, _| (vec![format!("throttled:v1:token_bucket:u{u}")], args(&[&"1000.0", &1000, &1])),
            admitted: |r| boolean(first(r)?).map(|limited| !limited),
        },
        Peer {
            kind: TokenBucket,
            name: "go-zero",
            file: "go-zero/tokenscript.lua",
            // The client's time in whole seconds.
            call: |u, now| {
                (
                    vec![format!("{{u{u}}}.tokens"), format!("{{u{u}}}.ts")],
                    args(&[&1000, &1000, &(now / 1_000_000), &1]),
                )
            },
            admitted: boolean,
        },
        Peer {
            kind: LeakyBucket,
            name: "throttled-py",
            file: "throttled-py/leaking_bucket.lua",
            call: |u, _| (vec![format!("throttled:v1:leaking_bucket:u{u}")], args(&[&"1000.0", &1000, &1])),
            admitted: |r| boolean(first(r)?).map(|limited| !limited),
        },
        Peer {
            kind: Gcra,
            name: "redis_rate",
            file: "redis_rate/allow_n.lua",
            // Burst 1000 takes 1000 at once, as the bench's burst 999.
            call: |u, _| (vec![format!("rate:u{u}")], args(&[&1000, &1000, &1, &1])),
            // The permits allowed: the cost, or 0.
            admitted: |r| Some(int(first(r)?)? > 0),
        },
        Peer {
            kind: Gcra,
            name: "throttled-py",
            file: "throttled-py/gcra.lua",
            // The emission interval in seconds, as redis-py writes the float.
            call: |u, _| (vec![format!("throttled:v1:gcra:u{u}")], args(&[&"0.001", &1000, &1])),
            // Whether it was limited: 1 or 0.
            admitted: |r| Some(int(first(r)?)? == 0),
        },
    ]
}

/// The peers' folder, if it is there.
fn folder() -> Result<PathBuf, PathBuf> {
    let path = crate::shared_file("REDLIMIT_BENCH_PEERS", "peers");
    if path.is_dir() {
        Ok(path)
    } else {
        Err(path)
    }
}

/// One case: whose script, for which algorithm, in which shape.
struct Case {
    kind: AlgorithmKind,
    /// `redlimit`, a peer's name, or `cell`.
    who: &'static str,
    /// [`BATCH`] decisions per script call or pipeline, else one.
    batched: bool,
    sends: Sends,
}

enum Sends {
    /// This project's script or `CL.THROTTLE`, as `--only cell` sends them,
    /// on the keys `<prefix><user>`.
    Cell { case: cell::Case, prefix: String },
    /// A peer's script, one `EVALSHA` per decision, pipelined when batched.
    Peer { peer: Peer, hash: String },
}

impl Case {
    fn name(&self) -> String {
        let shape = match (self.batched, &self.sends) {
            (false, _) => "one".to_string(),
            (true, Sends::Cell { case: cell::Case::Script { .. }, .. }) => format!("batch{BATCH}"),
            (true, _) => format!("pipelined{BATCH}"),
        };
        format!("peers/{}/{}/{shape}", self.kind.name(), self.who)
    }

    fn is_peer(&self) -> bool {
        matches!(self.sends, Sends::Peer { .. })
    }

    fn decisions_per_call(&self) -> u64 {
        if self.batched {
            BATCH
        } else {
            1
        }
    }

    /// One call of the load, deciding once for each of `users`.
    async fn call(&self, con: &mut MultiplexedConnection, users: &[u64], tally: &Tally) {
        match &self.sends {
            Sends::Cell { case, prefix } => {
                let keys: Vec<String> = users.iter().map(|u| format!("{prefix}{u}")).collect();
                case.call(con, &keys, tally).await
            }
            Sends::Peer { peer, hash } => {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros();
                let mut pipe = redis::pipe();
                // An error answers its own call; the others still count.
                pipe.ignore_errors();
                for &u in users {
                    let (keys, argv) = (peer.call)(u, now as u64);
                    pipe.cmd("EVALSHA").arg(hash).arg(keys.len()).arg(keys).arg(argv);
                }
                match pipe.query_async::<Vec<Value>>(con).await {
                    Ok(replies) => replies.iter().for_each(|reply| tally.count(reply, (peer.admitted)(reply))),
                    Err(error) => tally.fail(users.len(), &error),
                }
            }
        }
    }

    /// Whether the case holds the bench's policy: of [`CHECK_CALLS`]
    /// decisions at once on one fresh user, it admits about 1000 (a window
    /// that turns meanwhile, or a whole-second refill, admits up to 1000
    /// more) and none fails. A wrong unit or a misread reply shows here.
    /// The calls it admitted, and why it does not hold, if it does not.
    async fn holds_policy(&self, con: &MultiplexedConnection) -> (u64, Option<String>) {
        let tally = Tally::default();
        // A user the load never calls.
        let users = vec![load::USERS; self.decisions_per_call() as usize];
        let (users, tally_ref) = (&users, &tally);
        join_all((0..CHECK_CALLS / self.decisions_per_call()).map(|_| {
            let mut con = con.clone();
            async move { self.call(&mut con, users, tally_ref).await }
        }))
        .await;
        let (admitted, failed) = (tally.admitted(), tally.failed());
        let holds = failed == 0 && (950..=2050).contains(&admitted);
        (
            admitted,
            (!holds).then(|| {
                let fault = tally.fault().map_or(String::new(), |fault| format!(": {fault}"));
                format!("not the bench's policy, {admitted} admitted of {CHECK_CALLS} calls at once on one user{fault}")
            }),
        )
    }
}

/// Runs the section, on `only`'s algorithm or all of them.
pub async fn run(options: Options, only: Option<AlgorithmKind>) {
    let folder = match folder() {
        Ok(path) => path,
        Err(path) => {
            println!(
                "\nbench case=peers skipped: no peers' scripts at {} (set REDLIMIT_BENCH_PEERS to the folder)",
                path.display()
            );
            return;
        }
    };
    // redis-cell's module when it is there; the peers' cases need none.
    let module = cell::module().ok();
    let server = match &module {
        Some(module) => cell::start_server(module),
        None => RedisServer::start(),
    };
    let mut admin = raw_connection(&server.url()).await;
    let con = raw_connection(&server.url()).await;
    println!(
        "\npeers: each algorithm's script one decision per EVALSHA and in batches of {BATCH} (every key declared), \
         each peer's script one per EVALSHA and pipelined {BATCH} deep, CL.THROTTLE one and pipelined; {} in \
         flight, {} users, {} rounds of {:?}; scripts from {}",
        load::IN_FLIGHT,
        load::USERS,
        options.rounds,
        options.window / options.rounds,
        folder.display()
    );
    let mut cases = Vec::new();
    if module.is_some() {
        for batched in [false, true] {
            let case = cell::Case::Cell { pipelined: batched };
            let sends = Sends::Cell { case, prefix: "cell:u".into() };
            cases.push(Case { kind: AlgorithmKind::Gcra, who: "cell", batched, sends });
        }
    } else {
        println!(
            "(no redis-cell module, so no CL.THROTTLE cases: set REDLIMIT_BENCH_REDIS_CELL to its libredis_cell.so)"
        );
    }
    let peers = peers();
    for algo in crate::cases::algorithms().into_iter().filter(|a| only.is_none_or(|k| k == a.kind)) {
        for batched in [false, true] {
            // Keys as the runtime names them, for a limiter named `api`.
            let sends = Sends::Cell { case: cell::ours(&algo, batched), prefix: algo.storage_key("api", "u") };
            cases.push(Case { kind: algo.kind, who: "redlimit", batched, sends });
        }
        for peer in peers.iter().filter(|p| p.kind == algo.kind) {
            let path = folder.join(peer.file);
            let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let script = redis::Script::new(&source);
            // A script Redis refuses fails each call with NOSCRIPT: its cases are reported, not timed.
            let _ = script.prepare_invoke().load_async(&mut con.clone()).await;
            for batched in [false, true] {
                let sends = Sends::Peer { peer: *peer, hash: script.get_hash().to_string() };
                cases.push(Case { kind: algo.kind, who: peer.name, batched, sends });
            }
        }
    }

    let (mut checked, mut faults) = (Vec::new(), Vec::new());
    for case in &cases {
        flush(&mut admin).await;
        let (admitted, fault) = case.holds_policy(&con).await;
        checked.push(admitted);
        faults.push(fault);
    }
    let tallies: Vec<Arc<Tally>> = cases.iter().map(|_| Arc::default()).collect();
    let cases: Vec<Arc<Case>> = cases.into_iter().map(Arc::new).collect();
    let runs = in_turn(cases.len(), options.rounds, async |i| {
        // A case that does not hold the policy is not timed.
        if faults[i].is_some() {
            return Measured::default();
        }
        measure(&cases[i], &tallies[i], &mut admin, &con, options.run()).await
    })
    .await;
    for (fault, tally) in faults.iter_mut().zip(&tallies) {
        if fault.is_none() {
            *fault = tally.fault().map(|why| format!("while timed, {why}"));
        }
    }
    let runs: Vec<Vec<Measured>> = runs
        .iter()
        .zip(&cases)
        .map(|(runs, case)| runs.iter().map(|m| m.per_decision(case.decisions_per_call())).collect())
        .collect();

    // The best of the peers that answered right, for an algorithm and a
    // shape: the least CPU per decision in the rounds' own ratios to one of
    // them, as every figure here is read.
    let best = |kind: AlgorithmKind, batched: bool| {
        let peers: Vec<usize> = (0..cases.len())
            .filter(|&i| cases[i].is_peer() && cases[i].kind == kind && cases[i].batched == batched)
            .filter(|&i| faults[i].is_none())
            .collect();
        let to_first = |i: &usize| median_cpu_ratio(&runs[*i], &runs[peers[0]]);
        peers.iter().copied().min_by(|a, b| to_first(a).total_cmp(&to_first(b)))
    };
    let cell = |batched: bool| {
        (0..cases.len()).find(|&i| cases[i].who == "cell" && cases[i].batched == batched && faults[i].is_none())
    };
    let ratio = |i: usize, to: Option<usize>| match (&faults[i], to) {
        (Some(_), _) => "not timed".to_string(),
        (None, None) => "-".to_string(),
        (None, Some(to)) => format!("{:.3}", median_cpu_ratio(&runs[i], &runs[to])),
    };
    for (i, case) in cases.iter().enumerate() {
        if let Some(fault) = &faults[i] {
            println!("bench case={} not timed: {fault}", case.name());
            continue;
        }
        let m = Measured::mean(&runs[i]);
        let best = best(case.kind, case.batched);
        println!(
            "bench case={} decisions_per_s={:.0} server_cpu_us_per_decision={:.2} cpu_to_best_peer={} best_peer={} \
             cpu_to_cell={} check_admitted={}",
            case.name(),
            m.ops_per_s,
            m.server_cpu_us_per_op,
            ratio(i, best),
            best.map_or("-", |b| cases[b].who),
            ratio(i, cell(case.batched)),
            checked[i],
        );
    }
    println!(
        "(cpu_to_*: medians of the rounds' own ratios of redis-server CPU per decision, to the best peer's for the \
         algorithm and to CL.THROTTLE's, one call to one call, a batch of {BATCH} to {BATCH} pipelined; \
         check_admitted: of {CHECK_CALLS} calls at once on one fresh user before timing)"
    );

    println!("\n| algorithm | one call ÷ best peer's one | best peer, one | batch of {BATCH} ÷ best peer's pipelined {BATCH} | best peer, {BATCH} |");
    println!("|---|---:|---|---:|---|");
    let ours = |kind: AlgorithmKind, batched: bool| {
        (0..cases.len()).find(|&i| cases[i].who == "redlimit" && cases[i].kind == kind && cases[i].batched == batched)
    };
    for kind in AlgorithmKind::ALL {
        let (Some(one), Some(batch)) = (ours(kind, false), ours(kind, true)) else { continue };
        let (best_one, best_batch) = (best(kind, false), best(kind, true));
        let who = |b: Option<usize>| b.map_or("-", |b| cases[b].who);
        println!(
            "| {} | {} | {} | {} | {} |",
            kind.name(),
            ratio(one, best_one),
            who(best_one),
            ratio(batch, best_batch),
            who(best_batch)
        );
        if kind == AlgorithmKind::Gcra {
            println!(
                "| gcra ÷ CL.THROTTLE | {} | cell | {} | cell |",
                ratio(one, cell(false)),
                ratio(batch, cell(true))
            );
        }
    }
    drop(server);
}

/// `case` at the bench's calls in flight on distinct users.
async fn measure(
    case: &Arc<Case>,
    tally: &Arc<Tally>,
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
) -> Measured {
    let (case, tally, con) = (case.clone(), tally.clone(), con.clone());
    let per = case.decisions_per_call();
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (case, tally, mut con) = (case.clone(), tally.clone(), con.clone());
        async move {
            let users: Vec<u64> = (0..per).map(|j| load::user(task, n * per + j)).collect();
            case.call(&mut con, &users, &tally).await
        }
    })
    .await
}
