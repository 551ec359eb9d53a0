//! How fast a decision is, against raw Redis measured in the same run.
//!
//! ```text
//! cargo run --release --example bench              # about 90 s
//! cargo run --release --example bench -- --long    # 10 s per case
//! cargo run --release --example bench -- --secs 5  # any time per case
//! cargo run --release --example bench -- --only memory  # the memory backend against governor alone
//! cargo run --release --example bench -- --only gcra --rounds 8  # one algorithm's Redis cases
//! cargo run --release --example bench -- --only batching --algo gcra --in-flight 1,64  # group commit on/off
//! cargo run --release --example bench -- --only policies --algo gcra  # a policy per user against one fixed limiter
//! cargo run --release --example bench -- --only batch-forms  # a batch's keys declared, or carried in ARGV
//! cargo run --release --example bench -- --only cell --rounds 6  # Redis CPU per decision next to redis-cell
//! cargo run --release --example bench -- --only peers --rounds 6  # Redis CPU per decision next to the peers' own scripts
//! cargo run --release --example bench -- --only prefetch  # one hot key, prefetch on and off
//! cargo run --release --example bench -- --only acks  # replica acknowledgements on and off, one replica
//! examples/bench/client_instructions.sh fixed_window/script fixed_window/macro  # client instructions per decision
//! ```
//!
//! It starts its own `redis-server` (never yours) and, with 64 calls in
//! flight on one multiplexed connection, measures:
//!
//! * the ceiling: raw redis-rs EVALSHA of a minimal INCR+PEXPIRE script;
//! * per algorithm: (b) raw redis-rs EVALSHA of that algorithm's own script
//!   with the runtime's arguments, (c) `Limiter::check`, (d) a
//!   `#[rate_limit]` function, run in turn four times each with the ceiling
//!   so a change in the machine's load hits all four alike; (c) and (d) run
//!   on the global store, which batches (the default `RedisOptions`);
//! * a three-strategy policy, counting EVALSHA calls per decision, and three
//!   scripts given the client's clock (what `TIME` costs);
//! * group commit (alone with `--only batching`): per algorithm,
//!   `Limiter::check` on a batching store against an unbatched one and the
//!   ceiling, at 1, 4, 64 and 256 calls in flight, with the Redis time per
//!   decision;
//! * redis-cell (alone with `--only cell`): Redis's CPU per decision of
//!   `CL.THROTTLE`, one per call and pipelined, beside every algorithm's
//!   script in batches, on a server of its own with the module loaded;
//! * the peers (alone with `--only peers`): per algorithm, Redis's CPU per
//!   decision of its script, one per call and in batches, against the
//!   peers' own scripts (`../shared/bench/peers/`) one per call and
//!   pipelined, and `CL.THROTTLE`;
//!
//! then, on one thread, denials per second for a flooding client (the deny
//! cache), the memory backend's ns per check next to governor's keyed
//! limiter (in a process of its own, with `Store::memory()` as the global
//! store, so its `#[rate_limit]` row runs in memory), the per-call cost of `sliding_window` as sub-windows grow
//! and `sliding_log` memory per key. Each case prints one
//! line `bench case=<algo>/<path> ...`; BENCHMARKS.md records a run and
//! which targets it met.

#[path = "bench/acks.rs"]
mod acks;
#[path = "bench/batching.rs"]
mod batching;
#[path = "bench/cases.rs"]
mod cases;
#[path = "bench/cell.rs"]
mod cell;
#[path = "bench/counted.rs"]
mod counted;
#[path = "bench/declared.rs"]
mod declared;
#[path = "bench/growth.rs"]
mod growth;
#[path = "bench/load.rs"]
mod load;
#[path = "bench/local.rs"]
mod local;
#[path = "bench/naive.rs"]
mod naive;
#[path = "bench/peers.rs"]
mod peers;
#[path = "bench/policies.rs"]
mod policies;
#[path = "bench/prefetch.rs"]
mod prefetch;

use load::{drive, Measured};
use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::IntoConnectionInfo;
use redlimit::{AlgorithmKind, Limiter, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::sync::Arc;
use std::time::Duration;

/// The ceiling: the least a Lua rate limit can do (a fixed window that starts at the first hit).
const CEILING_SCRIPT: &str = r"
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return c
";

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub warmup: Duration,
    /// Measured time per case, split over `rounds` runs.
    pub window: Duration,
    /// The three paths of an algorithm run in turn this many times (b c d b
    /// c d ...), so a drift in the machine's load hits each alike.
    pub rounds: u32,
    /// `--only memory`: run the memory backend section alone (no Redis).
    pub only_memory: bool,
    /// `--only <algorithm>`: the ceiling and that algorithm's three paths alone.
    pub only_algorithm: Option<AlgorithmKind>,
    /// `--only batching`: the group commit section alone.
    pub only_batching: bool,
    /// `--only policies`: the per-user policies section alone (with `--algo`).
    pub only_policies: bool,
    /// `--only batch-forms`: a batch's keys declared against carried in ARGV, raw.
    pub only_batch_forms: bool,
    /// `--only cell`: Redis CPU per decision next to redis-cell's (with `--algo`).
    pub only_cell: bool,
    /// `--only prefetch`: one hot key with prefetch on and off.
    pub only_prefetch: bool,
    /// `--only peers`: Redis CPU per decision next to the peers' own scripts (with `--algo`).
    pub only_peers: bool,
    /// `--only acks`: replica acknowledgements on and off, one replica attached.
    pub only_acks: bool,
}

fn options() -> (Options, batching::Selection) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut secs = 2.5;
    let mut only_memory = false;
    let mut only_algorithm = None;
    let mut only_batching = false;
    let mut only_policies = false;
    let mut only_batch_forms = false;
    let mut only_cell = false;
    let mut only_prefetch = false;
    let mut only_peers = false;
    let mut only_acks = false;
    let mut selection = batching::Selection::default();
    let algorithm =
        |name: Option<&String>| AlgorithmKind::ALL.into_iter().find(|k| Some(k.name()) == name.map(String::as_str));
    let mut rounds = 4;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--long" => secs = 10.0,
            "--secs" => secs = iter.next().and_then(|s| s.parse().ok()).expect("--secs takes a number of seconds"),
            "--rounds" => {
                rounds = iter
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--rounds takes a number of runs")
            }
            "--only" => match iter.next() {
                Some(name) if name == "memory" => only_memory = true,
                Some(name) if name == "batching" => only_batching = true,
                Some(name) if name == "policies" => only_policies = true,
                Some(name) if name == "batch-forms" => only_batch_forms = true,
                Some(name) if name == "cell" => only_cell = true,
                Some(name) if name == "prefetch" => only_prefetch = true,
                Some(name) if name == "peers" => only_peers = true,
                Some(name) if name == "acks" => only_acks = true,
                name if algorithm(name).is_some() => only_algorithm = algorithm(name),
                other => panic!("--only takes `memory`, `batching`, `policies`, `batch-forms`, `cell`, `peers`, `prefetch`, `acks` or an algorithm's name, not {other:?}"),
            },
            "--algo" => {
                let name = iter.next();
                selection.algorithm =
                    Some(algorithm(name).unwrap_or_else(|| panic!("--algo takes an algorithm's name, not {name:?}")));
            }
            "--in-flight" => {
                selection.in_flight = iter
                    .next()
                    .map(|list| list.split(',').map(|n| n.trim().parse().ok().filter(|&n: &usize| n > 0)).collect())
                    .and_then(|list: Option<Vec<usize>>| list.filter(|l| !l.is_empty()))
                    .expect("--in-flight takes a comma-separated list of calls in flight, such as 1,4,64,256")
            }
            other => panic!(
                "unknown argument {other:?}; use --long, --secs N, --rounds N, --only memory, --only batching \
                 (with --algo <algorithm>, --in-flight 1,4,64,256), --only policies (with --algo <algorithm>), \
                 --only cell or --only peers (with --algo <algorithm>), --only prefetch, --only acks or --only <algorithm>"
            ),
        }
    }
    let options = Options {
        warmup: Duration::from_millis(200),
        window: Duration::from_secs_f64(secs),
        rounds,
        only_memory,
        only_algorithm,
        only_batching,
        only_policies,
        only_batch_forms,
        only_cell,
        only_prefetch,
        only_peers,
        only_acks,
    };
    (options, selection)
}

impl Options {
    /// One run of a case that is measured in `rounds` runs.
    fn run(self) -> Options {
        Options { window: self.window / self.rounds, ..self }
    }
}

/// What the environment variable `variable` names, else `relative` in
/// `../shared/bench/` next to the repository: a comparison's files that are
/// not part of the project.
pub fn shared_file(variable: &str, relative: &str) -> std::path::PathBuf {
    match std::env::var_os(variable) {
        Some(path) => path.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench").join(relative),
    }
}

/// A plain multiplexed redis-rs connection, with TCP_NODELAY as the runtime
/// sets it, and a generous response timeout: on a shared, overloaded machine
/// a pipeline can wait longer than redis-rs's 500 ms, which would count as
/// a failed call or end the run.
pub async fn raw_connection(url: &str) -> MultiplexedConnection {
    let info = url.into_connection_info().unwrap().set_tcp_settings(TcpSettings::default().set_nodelay(true));
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(5)));
    redis::Client::open(info)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect to the bench's redis-server")
}

/// One measured row.
struct Row {
    case: String,
    m: Measured,
    /// Throughput ÷ the raw EVALSHA of the same script (1 for a raw script
    /// itself); `None` where the case has no raw counterpart.
    same_script: Option<f64>,
    /// Median over rounds of throughput ÷ the ceiling measured in the same
    /// round; `None` for cases run once (÷ the first ceiling then).
    same_ceiling: Option<f64>,
}

fn main() {
    if cell::print_script() {
        return;
    }
    if let Some((case, calls)) = counted::requested() {
        counted::run(&case, calls);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let (options, selection) = options();
    runtime.block_on(run(options, selection));
}

async fn run(options: Options, selection: batching::Selection) {
    if options.only_memory {
        redlimit::init(Store::memory()).expect("the global store is set once");
        local::memory_backend(options).await;
        return;
    }
    let server = RedisServer::start();
    let mut admin = raw_connection(&server.url()).await;
    let load_connection = raw_connection(&server.url()).await;
    local::print_machine(&mut admin).await;
    if options.only_cell {
        cell::run(options, selection.algorithm).await;
        return;
    }
    if options.only_peers {
        peers::run(options, selection.algorithm).await;
        return;
    }
    if options.only_batching {
        batching::run(&server.url(), &mut admin, &load_connection, options, &selection).await;
        return;
    }
    if options.only_batch_forms {
        declared::run(&mut admin, options).await;
        return;
    }
    if options.only_prefetch {
        let redis_options = redlimit::RedisOptions::default().with_response_timeout(Duration::from_secs(5));
        let store = Store::redis_with(&server.url(), redis_options).await.expect("connect the runtime");
        prefetch::run(&store, &mut admin, options).await;
        return;
    }
    if options.only_acks {
        acks::run(&server, &mut admin, options).await;
        return;
    }
    if options.only_policies {
        let redis_options = redlimit::RedisOptions::default().with_response_timeout(Duration::from_secs(5));
        let store = Store::redis_with(&server.url(), redis_options).await.expect("connect the runtime");
        policies::run(&store, &mut admin, options, selection.algorithm).await;
        return;
    }
    println!(
        "{:?} measured per case (script, limiter and #[rate_limit] in turn, {} runs each, {:?} warm-up per run); {} calls in flight; {} users",
        options.window,
        options.rounds,
        options.warmup,
        load::IN_FLIGHT,
        load::USERS
    );
    println!(
        "limiter and #[rate_limit] run on the global store with batching on (the default RedisOptions) at {} calls in \
         flight: a batch decides the calls of one limiter waiting at the same time; the group commit section compares \
         it with off\n",
        load::IN_FLIGHT
    );

    // A generous response timeout: on a shared, overloaded machine a call
    // can wait longer than the default 250 ms, which would end the run.
    // Batching is the default; it is named here because (c) and (d) are
    // measured with it.
    let redis_options =
        redlimit::RedisOptions::default().with_response_timeout(Duration::from_secs(5)).with_batching(true);
    let store = Store::redis_with(&server.url(), redis_options).await.expect("connect the runtime");
    redlimit::init(store.clone()).expect("the global store is set once");

    let mut rows: Vec<Row> = Vec::new();
    let ceiling = measure_ceiling(&mut admin, &load_connection, load::IN_FLIGHT, options).await;
    rows.push(Row { case: "ceiling/incr_pexpire".into(), m: ceiling, same_script: Some(1.0), same_ceiling: Some(1.0) });
    println!("ceiling (INCR+PEXPIRE): {:.0} decisions/s", ceiling.ops_per_s);

    for algo in cases::algorithms().into_iter().filter(|a| options.only_algorithm.is_none_or(|k| k == a.kind)) {
        let name = algo.kind.name();
        check_arguments(&algo, &store, &load_connection).await;
        let (mut script, mut limiter, mut attribute, mut ceilings) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..options.rounds {
            // The ceiling in every round too: ÷ceiling compares runs made
            // under the same load, as ÷script does. Every other round runs
            // the four in reverse, so a case is not always the one that
            // follows another's load (or the one the machine warmed up for).
            let run = options.run();
            if round % 2 == 0 {
                ceilings.push(measure_ceiling(&mut admin, &load_connection, load::IN_FLIGHT, run).await);
                script.push(measure_script(&algo, &mut admin, &load_connection, run).await);
                limiter.push(measure_limiter(&algo, &mut admin, &store, run).await);
                attribute.push(measure_macro(&algo, &mut admin, run).await);
            } else {
                attribute.push(measure_macro(&algo, &mut admin, run).await);
                limiter.push(measure_limiter(&algo, &mut admin, &store, run).await);
                script.push(measure_script(&algo, &mut admin, &load_connection, run).await);
                ceilings.push(measure_ceiling(&mut admin, &load_connection, load::IN_FLIGHT, run).await);
            }
        }
        // Each ratio is the median of the runs' own ratios: a burst of load
        // from elsewhere on the machine lands in one run, not in the figure.
        let (limiter_ratio, attribute_ratio) = (median_ratio(&limiter, &script), median_ratio(&attribute, &script));
        let to_ceiling = |runs: &[Measured]| Some(median_ratio(runs, &ceilings));
        let (script_c, limiter_c, attribute_c) = (to_ceiling(&script), to_ceiling(&limiter), to_ceiling(&attribute));
        let (script, limiter, attribute) =
            (Measured::mean(&script), Measured::mean(&limiter), Measured::mean(&attribute));
        println!(
            "{name:<15} script {:>8.0}/s  limiter {:>8.0}/s  #[rate_limit] {:>8.0}/s  server {:.2} µs/call",
            script.ops_per_s, limiter.ops_per_s, attribute.ops_per_s, script.server_us_per_call
        );
        rows.push(Row { case: format!("{name}/script"), m: script, same_script: Some(1.0), same_ceiling: script_c });
        rows.push(Row {
            case: format!("{name}/limiter"),
            m: limiter,
            same_script: Some(limiter_ratio),
            same_ceiling: limiter_c,
        });
        rows.push(Row {
            case: format!("{name}/macro"),
            m: attribute,
            same_script: Some(attribute_ratio),
            same_ceiling: attribute_c,
        });
    }

    if options.only_algorithm.is_some() {
        print_table(&rows, ceiling.ops_per_s);
        print_targets(&rows, ceiling.ops_per_s);
        return;
    }

    let three = {
        let limiter = Limiter::new("bench.three", cases::three_strategies(), &store);
        let keys = Arc::new((0..load::USERS).map(|u| format!("user:{u}")).collect::<Vec<_>>());
        flush(&mut admin).await;
        drive(&mut admin, load::IN_FLIGHT, options.warmup, options.run().window, move |task, n| {
            let (limiter, keys) = (limiter.clone(), keys.clone());
            async move {
                limiter.check(&keys[load::user(task, n) as usize], 1).await.expect("check");
            }
        })
        .await
    };
    rows.push(Row {
        case: "fixed_window_3_strategies/limiter".into(),
        m: three,
        same_script: None,
        same_ceiling: None,
    });

    // What TIME costs inside a script: the same scripts with the client's clock.
    for algo in cases::algorithms()
        .into_iter()
        .filter(|a| matches!(a.kind, AlgorithmKind::Gcra | AlgorithmKind::TokenBucket | AlgorithmKind::FixedWindow))
    {
        let m = measure_script_clock(&algo, &mut admin, &load_connection, options.run(), true).await;
        rows.push(Row {
            case: format!("{}/script_client_clock", algo.kind.name()),
            m,
            same_script: None,
            same_ceiling: None,
        });
    }

    // Our scripts' server time against the naive forms a first Lua limiter
    // would write, in turn in this run.
    let mut naive_ratios = Vec::new();
    for (algo, source) in
        [(AlgorithmKind::Gcra, naive::NAIVE_GCRA), (AlgorithmKind::TokenBucket, naive::NAIVE_TOKEN_BUCKET)]
    {
        let algo = cases::algorithms().into_iter().find(|a| a.kind == algo).expect("every algorithm has a case");
        let (ours, theirs) = naive::server_times(&algo, source, &mut admin, &load_connection, options).await;
        println!(
            "bench case={}/naive_form server_us_per_call={theirs:.2} ours={ours:.2} ratio={:.3}",
            algo.kind.name(),
            ours / theirs
        );
        naive_ratios.push((algo.kind, ours, theirs));
    }

    print_table(&rows, ceiling.ops_per_s);
    print_targets(&rows, ceiling.ops_per_s);
    for (kind, ours, theirs) in naive_ratios {
        println!(
            "  {:<15} server time ÷ its naive form in this run: {ours:.2} ÷ {theirs:.2} µs = {:.3}",
            kind.name(),
            ours / theirs
        );
    }

    batching::run(&server.url(), &mut admin, &load_connection, options, &selection).await;
    cell::run(options, None).await;

    local::flood(&store, &mut admin).await;
    local::memory_backend_in_own_process(options);
    growth::sliding_window(&mut admin, &load_connection, options).await;
    growth::sliding_log_memory(&mut admin, &load_connection).await;
    drop(server);
}

/// The ceiling: raw EVALSHA of [`CEILING_SCRIPT`] over the same users, one
/// call per decision, `in_flight` calls at a time.
async fn measure_ceiling(
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    in_flight: usize,
    options: Options,
) -> Measured {
    let script = Arc::new(redis::Script::new(CEILING_SCRIPT));
    let keys = Arc::new((0..load::USERS).map(|u| format!("ceiling:user:{u}")).collect::<Vec<_>>());
    let con = con.clone();
    flush(admin).await;
    drive(admin, in_flight, options.warmup, options.window, move |task, n| {
        let (script, keys, mut con) = (script.clone(), keys.clone(), con.clone());
        async move {
            let _: i64 = script
                .key(&keys[load::user_among(task, n, in_flight) as usize])
                .arg(1000)
                .invoke_async(&mut con)
                .await
                .expect("ceiling EVALSHA");
        }
    })
    .await
}

/// Empties the bench's own server between cases, so each starts alike.
pub async fn flush(admin: &mut MultiplexedConnection) {
    let _: () = redis::cmd("FLUSHALL").query_async(admin).await.expect("FLUSHALL on the bench's own server");
}

/// The raw arguments must be the runtime's: the same call on a fresh key
/// gives the same answer both ways.
async fn check_arguments(algo: &cases::Algo, store: &Store, con: &MultiplexedConnection) {
    let limiter = Limiter::new("bench.argcheck", algo.policy.clone(), store);
    let decision = limiter.check("fresh", 3).await.expect("check");
    let mut con = con.clone();
    let raw = RawCall::new(algo, false);
    let key = algo.storage_key("bench.argcheck", "raw-fresh");
    let (allowed, limit, remaining) = match algo.counter {
        // The counter's `v` and `now`, two doubles: v = count × (W + 2) + t.
        Some((limit, window_ms)) => {
            let reply: Vec<u8> = raw.invocation(&key, 3).invoke_async(&mut con).await.expect("raw EVALSHA");
            let v = f64::from_le_bytes(reply[..8].try_into().expect("16 bytes")) as i64;
            (v >= 0, limit, limit - v.unsigned_abs() / (window_ms + 2))
        }
        // A bucket or gcra: `v` and `now` as two doubles; on a fresh key v
        // is, in units of 1/p of a permit, the tokens left, or the level or
        // debt the call took (lua/set_state.lua).
        None if matches!(raw.family, Family::Bucket) => {
            let reply: Vec<u8> = raw.invocation(&key, 3).invoke_async(&mut con).await.expect("raw EVALSHA");
            let v = f64::from_le_bytes(reply[..8].try_into().expect("16 bytes"));
            let (limit, p) = (decision.limit, algo.params[2]);
            let left =
                if algo.kind == redlimit::AlgorithmKind::TokenBucket { v as u64 / p } else { limit - v as u64 / p };
            (v >= 0.0, limit, left)
        }
        None => {
            let reply: Vec<u8> = raw.invocation(&key, 3).invoke_async(&mut con).await.expect("raw EVALSHA");
            let numbers = redlimit_test_support::redis_server::window_numbers(&reply);
            (numbers[0] == 1, numbers[1] as u64, numbers[2] as u64)
        }
    };
    assert_eq!(
        (allowed, limit, remaining),
        (decision.allowed, decision.limit, decision.remaining),
        "{}: the raw arguments do not match the runtime's",
        algo.policy
    );
}

/// One algorithm's script and ARGV exactly as the Redis backend sends them.
struct RawCall {
    script: redis::Script,
    /// The policy's numbers, the first ARGV of every call.
    policy: Vec<u8>,
    family: Family,
    /// ARGV carries this process's time (as `Store::with_clock(SystemClock)`
    /// sends it), so the script skips `TIME`.
    client_clock: bool,
}

/// How a script replies (`ratelimit/src/backend/redis/reply.rs`).
#[derive(Clone, Copy)]
enum Family {
    /// The window algorithms: integers packed as doubles.
    Window,
    /// The buckets and gcra: 16 bytes.
    Bucket,
    /// The fixed window counter: the decision and Redis's time, 16 bytes.
    Counter,
}

impl RawCall {
    fn new(algo: &cases::Algo, client_clock: bool) -> RawCall {
        let family = match algo.kind {
            AlgorithmKind::FixedWindow if algo.counter.is_some() && !client_clock => Family::Counter,
            AlgorithmKind::FixedWindow | AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog => Family::Window,
            _ => Family::Bucket,
        };
        let source = redlimit::__private::script_source(&algo.policy, !client_clock);
        let policy = redlimit::__private::policy_argument(&algo.policy, !client_clock);
        RawCall { script: redis::Script::new(&source), policy, family, client_clock }
    }

    /// One call of cost 1 on `key`, its reply read as the runtime reads it.
    async fn call(&self, con: &mut MultiplexedConnection, key: &str) {
        let invocation = self.invocation(key, 1);
        match self.family {
            Family::Counter | Family::Bucket | Family::Window => {
                let _: Vec<u8> = invocation.invoke_async(con).await.expect("raw EVALSHA");
            }
        }
    }

    /// `lua/prelude.lua`'s ARGV: the policy, then cost, peek, now, slack,
    /// each left out while it and all after it are the common call's (cost
    /// 1, a check, the server's clock).
    fn invocation(&self, key: &str, cost: u64) -> redis::ScriptInvocation<'_> {
        let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
        let mut invocation = self.script.key(key);
        invocation.arg(&self.policy);
        if self.client_clock {
            invocation.arg(cost).arg(0).arg(now()).arg(60_000);
        } else if cost != 1 {
            invocation.arg(cost);
        }
        invocation
    }
}

async fn measure_script(
    algo: &cases::Algo,
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
) -> Measured {
    measure_script_clock(algo, admin, con, options, false).await
}

/// The raw script through redis-rs, as [`RawCall`] sends it.
async fn measure_script_clock(
    algo: &cases::Algo,
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
    client_clock: bool,
) -> Measured {
    let raw = Arc::new(RawCall::new(algo, client_clock));
    let keys = Arc::new(raw_keys(algo));
    let con = con.clone();
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (raw, keys, mut con) = (raw.clone(), keys.clone(), con.clone());
        async move { raw.call(&mut con, &keys[load::user(task, n) as usize]).await }
    })
    .await
}

/// The storage keys the raw script of `algo` is called on, one per user.
fn raw_keys(algo: &cases::Algo) -> Vec<String> {
    (0..load::USERS).map(|u| algo.storage_key("bench.script", &format!("user:{u}"))).collect()
}

async fn measure_limiter(
    algo: &cases::Algo,
    admin: &mut MultiplexedConnection,
    store: &Store,
    options: Options,
) -> Measured {
    let limiter = Limiter::new(format!("bench.limiter.{}", algo.kind.name()), algo.policy.clone(), store);
    let keys = Arc::new((0..load::USERS).map(|u| format!("user:{u}")).collect::<Vec<_>>());
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (limiter, keys) = (limiter.clone(), keys.clone());
        async move {
            limiter.check(&keys[load::user(task, n) as usize], 1).await.expect("Limiter::check");
        }
    })
    .await
}

async fn measure_macro(algo: &cases::Algo, admin: &mut MultiplexedConnection, options: Options) -> Measured {
    let kind = algo.kind;
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| async move {
        let _ = cases::call_macro(kind, load::user(task, n)).await;
    })
    .await
}

/// The median over runs of `path`'s throughput divided by the script's in the same round.
fn median_ratio(path: &[Measured], script: &[Measured]) -> f64 {
    let mut ratios: Vec<f64> = path.iter().zip(script).map(|(p, s)| p.ops_per_s / s.ops_per_s).collect();
    ratios.sort_by(f64::total_cmp);
    let mid = ratios.len() / 2;
    if ratios.len() % 2 == 1 {
        ratios[mid]
    } else {
        (ratios[mid - 1] + ratios[mid]) / 2.0
    }
}

/// The median over runs of `path`'s redis-server CPU per decision divided
/// by `base`'s in the same round.
fn median_cpu_ratio(path: &[Measured], base: &[Measured]) -> f64 {
    let cpu = |runs: &[Measured]| {
        runs.iter().map(|m| Measured { ops_per_s: m.server_cpu_us_per_op, ..*m }).collect::<Vec<_>>()
    };
    median_ratio(&cpu(path), &cpu(base))
}

impl Measured {
    /// A run whose calls each decided `per`, counted per decision.
    fn per_decision(&self, per: u64) -> Measured {
        let per = per as f64;
        Measured { ops_per_s: self.ops_per_s * per, server_cpu_us_per_op: self.server_cpu_us_per_op / per, ..*self }
    }

    /// The mean of several runs of one case, field by field.
    fn mean(runs: &[Measured]) -> Measured {
        let n = runs.len() as f64;
        let avg = |f: fn(&Measured) -> f64| runs.iter().map(f).sum::<f64>() / n;
        Measured {
            ops_per_s: avg(|m| m.ops_per_s),
            p50_us: avg(|m| m.p50_us),
            p99_us: avg(|m| m.p99_us),
            cpu_us_per_op: avg(|m| m.cpu_us_per_op),
            server_us_per_call: avg(|m| m.server_us_per_call),
            server_us_per_decision: avg(|m| m.server_us_per_decision),
            server_cpu_us_per_op: avg(|m| m.server_cpu_us_per_op),
            evalsha_per_op: avg(|m| m.evalsha_per_op),
        }
    }
}

fn print_table(rows: &[Row], ceiling: f64) {
    println!(
        "\n{:<36} {:>10} {:>8} {:>8} {:>12} {:>12} {:>12} {:>8} {:>8}",
        "case", "ops/s", "p50 µs", "p99 µs", "client µs/op", "server µs", "µs/decision", "÷script", "÷ceiling"
    );
    for row in rows {
        let m = &row.m;
        let same = row.same_script.map_or("-".to_string(), |r| format!("{r:.3}"));
        println!(
            "{:<36} {:>10.0} {:>8.0} {:>8.0} {:>12.2} {:>12.2} {:>12.2} {:>8} {:>8.3}",
            row.case,
            m.ops_per_s,
            m.p50_us,
            m.p99_us,
            m.cpu_us_per_op,
            m.server_us_per_call,
            m.server_us_per_decision,
            same,
            row.same_ceiling.unwrap_or(m.ops_per_s / ceiling)
        );
    }
    println!("(server µs: EVALSHA's usec_per_call, per script call; µs/decision: its total usec ÷ decisions, less where a batched call decides several)");
    println!();
    for row in rows {
        let m = &row.m;
        println!(
            "bench case={} ops_per_s={:.0} ratio_to_same_script={} ratio_to_ceiling={:.3} p99_us={:.0} server_us_per_call={:.2} server_us_per_decision={:.2} server_cpu_us_per_op={:.2} evalsha_per_decision={:.3}",
            row.case,
            m.ops_per_s,
            // "-" where the case has no raw script of its own to compare with.
            row.same_script.map_or("-".to_string(), |r| format!("{r:.3}")),
            row.same_ceiling.unwrap_or(m.ops_per_s / ceiling),
            m.p99_us,
            m.server_us_per_call,
            m.server_us_per_decision,
            m.server_cpu_us_per_op,
            m.evalsha_per_op
        );
    }
}

fn print_targets(rows: &[Row], ceiling: f64) {
    let find = |case: &str| {
        rows.iter()
            .find(|r| r.case == case)
            .map(|r| (r.m, r.same_script.unwrap_or(1.0), r.same_ceiling.unwrap_or(r.m.ops_per_s / ceiling)))
    };
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!("\ntargets");
    for kind in AlgorithmKind::ALL {
        for path in ["limiter", "macro"] {
            if let Some((_, ratio, _)) = find(&format!("{}/{path}", kind.name())) {
                let how = if path == "limiter" { "Limiter::check" } else { "#[rate_limit]" };
                println!(
                    "  {:<15} {how:<14} ÷ same script {ratio:.3} (>= 0.93): {}",
                    kind.name(),
                    verdict(ratio >= 0.93)
                );
            }
        }
    }
    if let Some((m, _, _)) = find("fixed_window_3_strategies/limiter") {
        // One script call per decision at most: never one per strategy, and
        // fewer where batching puts several decisions in one call.
        println!(
            "  three strategies: {:.3} EVALSHA per decision (at most one round trip, batched or not): {}",
            m.evalsha_per_op,
            verdict(m.evalsha_per_op > 0.0 && m.evalsha_per_op < 1.01)
        );
    }
}
