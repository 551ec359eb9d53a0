//! Redis's CPU per decision next to redis-cell's: `CL.THROTTLE` one per
//! call and pipelined, against every algorithm's raw script in its batch
//! form (every key declared, as the runtime sends to one server), on one
//! redis-server of the bench's own with the module loaded, all cases in
//! turn in every round (every other round reversed).
//!
//! The module is `../shared/bench/redis-cell/libredis_cell.so` next to the
//! repository, or the file `REDLIMIT_BENCH_REDIS_CELL` names; without it
//! the section says so in one line and is skipped.

use crate::load::{self, drive, in_turn, Measured, Tally};
use crate::{flush, median_cpu_ratio, median_ratio, raw_connection, Options};
use redis::aio::MultiplexedConnection;
use redis::Value;
use redlimit::AlgorithmKind;
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Decisions per script call in the batch cases, and per pipeline in cell's.
pub const BATCH: u64 = 16;

/// `bench --script <algorithm> [client]`: prints the policy's numbers (hex)
/// on one line, then the script the runtime binds for the bench's policy of
/// that algorithm on Redis's clock (on the client's with `client`), for
/// `examples/bench/instructions.py`.
/// Returns whether the command line asked for it.
pub fn print_script() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(at) = args.iter().position(|a| a == "--script") else { return false };
    let name = args.get(at + 1).expect("--script takes an algorithm's name");
    let algo = crate::cases::algorithms()
        .into_iter()
        .find(|a| a.kind.name() == name)
        .unwrap_or_else(|| panic!("no algorithm {name:?}"));
    let server_clock = args.get(at + 2).map(String::as_str) != Some("client");
    let policy = redlimit::__private::policy_argument(&algo.policy, server_clock);
    println!("{}", policy.iter().map(|b| format!("{b:02x}")).collect::<String>());
    print!("{}", redlimit::__private::script_source(&algo.policy, server_clock));
    true
}

/// The module to load, if it is there.
pub fn module() -> Result<PathBuf, PathBuf> {
    let path = crate::shared_file("REDLIMIT_BENCH_REDIS_CELL", "redis-cell/libredis_cell.so");
    if path.is_file() {
        Ok(path)
    } else {
        Err(path)
    }
}

/// A redis-server of the bench's own with the module loaded.
pub fn start_server(module: &Path) -> RedisServer {
    let module = module.to_string_lossy();
    RedisServer::start_on(free_port, &["--appendonly", "no", "--loadmodule", &module], None)
}

/// One case of the section: what each call of the load sends.
#[derive(Clone)]
pub enum Case {
    /// `CL.THROTTLE` of `BATCH` keys in one pipeline, or of one key.
    Cell { pipelined: bool },
    /// One algorithm's script, one decision per `EVALSHA`, or a batch of `BATCH`.
    Script { kind: AlgorithmKind, script: Arc<redis::Script>, policy: Arc<Vec<u8>>, batch: bool },
}

impl Case {
    pub fn name(&self) -> String {
        match self {
            Case::Cell { pipelined: false } => "cell/one".into(),
            Case::Cell { pipelined: true } => format!("cell/pipelined{BATCH}"),
            Case::Script { kind, batch: false, .. } => format!("{}/one", kind.name()),
            Case::Script { kind, batch: true, .. } => format!("{}/batch{BATCH}", kind.name()),
        }
    }

    pub fn decisions_per_call(&self) -> u64 {
        match self {
            Case::Cell { pipelined } | Case::Script { batch: pipelined, .. } => {
                if *pipelined {
                    BATCH
                } else {
                    1
                }
            }
        }
    }

    /// One call of the load: `keys` are the users it decides for; each
    /// decision's answer goes to `tally`.
    pub async fn call(&self, con: &mut MultiplexedConnection, keys: &[String], tally: &Tally) {
        match self {
            Case::Cell { .. } => {
                // The bench's gcra policy: burst 999, 1000 per 1 s, one permit.
                let mut pipe = redis::pipe();
                pipe.ignore_errors();
                for key in keys {
                    pipe.cmd("CL.THROTTLE").arg(key).arg(999).arg(1000).arg(1).arg(1);
                }
                match pipe.query_async::<Vec<Value>>(con).await {
                    // Five integers, the first 0 when admitted.
                    Ok(replies) => replies.iter().for_each(|reply| {
                        tally.count(
                            reply,
                            match reply {
                                Value::Array(r) if r.len() == 5 => match r[0] {
                                    Value::Int(0) => Some(true),
                                    Value::Int(1) => Some(false),
                                    _ => None,
                                },
                                _ => None,
                            },
                        )
                    }),
                    Err(error) => tally.fail(keys.len(), &error),
                }
            }
            Case::Script { script, policy, batch, .. } => {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
                if *batch {
                    // The count, no words (every call is the common call:
                    // cost 1, a check, Redis's clock), the one policy.
                    cmd.arg(keys.len()).arg("");
                }
                cmd.arg(&**policy);
                let reply = match cmd.query_async(con).await {
                    Ok(reply) => Ok(reply),
                    // The first EVALSHA of a fresh server: load the script, then go on.
                    Err(_) => match script.prepare_invoke().load_async(con).await {
                        Ok(_) => cmd.query_async(con).await,
                        Err(error) => Err(error),
                    },
                };
                match reply {
                    Ok(reply) => count_replies(&reply, keys.len(), tally),
                    Err(error) => tally.fail(keys.len(), &error),
                }
            }
        }
    }
}

/// Counts the answers in a reply of this project's scripts to `calls`
/// decisions (lua/README.md, "Replies").
fn count_replies(reply: &Value, calls: usize, tally: &Tally) {
    match reply {
        // Bucket and counter replies, one or a batch's joined: 16 bytes
        // each, the first double at least 0 when admitted.
        Value::BulkString(bytes) if bytes.len() == 16 * calls => {
            for one in bytes.chunks(16) {
                tally.count(reply, Some(f64::from_le_bytes(one[..8].try_into().expect("8 bytes")) >= 0.0));
            }
        }
        // A batch's table: each call's own reply, a failed call's error alone in a table.
        Value::Array(replies) if calls > 1 && replies.len() == calls => {
            replies.iter().for_each(|reply| count_replies(reply, 1, tally))
        }
        // A window's numbers, packed: allowed first, 1 or 0.
        Value::BulkString(bytes) if calls == 1 && bytes.len() >= 56 && bytes.len() % 8 == 0 => {
            tally.count(reply, Some(f64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) > 0.0))
        }
        _ => tally.fail(calls, reply),
    }
}

/// Runs the section, on `only`'s algorithm or all of them.
pub async fn run(options: Options, only: Option<AlgorithmKind>) {
    let module = match module() {
        Ok(path) => path,
        Err(path) => {
            println!(
                "\nbench case=cell skipped: no redis-cell module at {} (set REDLIMIT_BENCH_REDIS_CELL to its libredis_cell.so)",
                path.display()
            );
            return;
        }
    };
    let server = start_server(&module);
    let mut admin = raw_connection(&server.url()).await;
    let con = raw_connection(&server.url()).await;
    println!(
        "\nredis-cell: CL.THROTTLE one per call and {BATCH} per pipeline, against each algorithm's raw script in \
         batches of {BATCH} (every key declared) and gcra one per EVALSHA; {} in flight, {} users, {} rounds of {:?}; \
         module {}",
        load::IN_FLIGHT,
        load::USERS,
        options.rounds,
        options.window / options.rounds,
        module.display()
    );
    let mut cases = vec![Case::Cell { pipelined: false }, Case::Cell { pipelined: true }];
    for algo in crate::cases::algorithms() {
        if algo.kind == AlgorithmKind::Gcra {
            cases.push(ours(&algo, false));
        }
        if only.is_none_or(|k| k == algo.kind) {
            cases.push(ours(&algo, true));
        }
    }
    let tallies: Vec<Arc<Tally>> = cases.iter().map(|_| Arc::default()).collect();
    let runs = in_turn(cases.len(), options.rounds, async |i| {
        measure(&cases[i], &tallies[i], &mut admin, &con, options.run()).await
    })
    .await;
    // Per decision: a call of the load decided `decisions_per_call`.
    let per_decision =
        |i: usize| runs[i].iter().map(|m| m.per_decision(cases[i].decisions_per_call())).collect::<Vec<_>>();
    let (cell_one, cell_pipelined) = (per_decision(0), per_decision(1));
    for (i, case) in cases.iter().enumerate() {
        if let Some(fault) = tallies[i].fault() {
            println!("bench case=cell/{} not timed: {fault}", case.name());
            continue;
        }
        let mine = per_decision(i);
        let m = Measured::mean(&mine);
        println!(
            "bench case=cell/{} decisions_per_s={:.0} server_cpu_us_per_decision={:.2} cpu_to_cell_pipelined={:.3} \
             cpu_to_cell_one={:.3} decisions_per_s_to_cell_pipelined={:.3}",
            case.name(),
            m.ops_per_s,
            m.server_cpu_us_per_op,
            median_cpu_ratio(&mine, &cell_pipelined),
            median_cpu_ratio(&mine, &cell_one),
            median_ratio(&mine, &cell_pipelined),
        );
    }
    println!(
        "(cpu_to_*: medians of the rounds' own ratios of redis-server CPU per decision; at most 1: no more than cell)"
    );
    drop(server);
}

/// `algo`'s script as the runtime binds it for the policy on Redis's clock,
/// one decision per call or in batches.
pub fn ours(algo: &crate::cases::Algo, batch: bool) -> Case {
    let script = Arc::new(redis::Script::new(&redlimit::__private::script_source(&algo.policy, true)));
    let policy = Arc::new(redlimit::__private::policy_argument(&algo.policy, true));
    Case::Script { kind: algo.kind, script, policy, batch }
}

/// `case` at the bench's calls in flight on distinct users.
async fn measure(
    case: &Case,
    tally: &Arc<Tally>,
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
) -> Measured {
    let (case, tally, con) = (Arc::new(case.clone()), tally.clone(), con.clone());
    let per = case.decisions_per_call();
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (case, tally, mut con) = (case.clone(), tally.clone(), con.clone());
        async move {
            let keys: Vec<String> = (0..per).map(|j| format!("cell:{}", load::user(task, n * per + j))).collect();
            case.call(&mut con, &keys, &tally).await
        }
    })
    .await
}
