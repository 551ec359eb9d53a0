//! Group commit: `Limiter::check` on a store that batches the calls of a
//! limiter waiting at the same time into one script call, against a store
//! that sends each call as its own EVALSHA, and the ceiling, at several
//! numbers of calls in flight on distinct keys, in turn in every round.

use crate::load::{self, drive, Measured};
use crate::{flush, median_ratio, Options};
use redis::aio::MultiplexedConnection;
use redlimit::{AlgorithmKind, Limiter, RedisOptions, Store};
use std::sync::Arc;
use std::time::Duration;

/// Calls in flight the section runs at, unless `--in-flight` says otherwise.
pub const IN_FLIGHT: [usize; 4] = [1, 4, 64, 256];

/// Batched ÷ unbatched throughput asked of gcra and the buckets at 64 in flight.
const TARGET_SPEEDUP: f64 = 1.5;
/// The algorithms that speed-up is asked of.
const TARGETED: [AlgorithmKind; 3] = [AlgorithmKind::Gcra, AlgorithmKind::TokenBucket, AlgorithmKind::LeakyBucket];
/// How much slower batched p50 may read than unbatched at 1 and 4 in flight
/// and still count as "no worse, within noise".
const P50_NOISE: f64 = 1.10;

/// What the section measures: which algorithms, at which numbers of calls in flight.
#[derive(Debug, Clone)]
pub struct Selection {
    /// `--algo <name>`: one algorithm; every one when `None`.
    pub algorithm: Option<AlgorithmKind>,
    /// `--in-flight 1,4,64`: the numbers of calls in flight.
    pub in_flight: Vec<usize>,
}

impl Default for Selection {
    fn default() -> Self {
        Selection { algorithm: None, in_flight: IN_FLIGHT.to_vec() }
    }
}

/// One algorithm at one number of calls in flight: the three cases' means
/// over the rounds and the medians of the rounds' own ratios.
struct Cell {
    kind: AlgorithmKind,
    in_flight: usize,
    on: Measured,
    off: Measured,
    ceiling: Measured,
    /// Batched ÷ unbatched throughput.
    on_off: f64,
    /// Batched ÷ ceiling throughput.
    on_ceiling: f64,
    /// Unbatched ÷ ceiling throughput.
    off_ceiling: f64,
    /// Batched ÷ unbatched p50 latency.
    p50_on_off: f64,
    /// The lowest and highest unbatched p50 of the rounds: how far one
    /// configuration's p50 moves from round to round.
    off_p50_range: (f64, f64),
}

/// The two stores, one batching and one not, both with the bench's 5 s
/// response timeout (an overloaded machine slows the run instead of ending it).
async fn stores(url: &str) -> (Store, Store) {
    let options = RedisOptions::default().with_response_timeout(Duration::from_secs(5));
    let on = Store::redis_with(url, options.clone().with_batching(true)).await.expect("connect the batching store");
    let off = Store::redis_with(url, options.with_batching(false)).await.expect("connect the unbatched store");
    (on, off)
}

/// Runs the section and prints its lines, table and targets.
pub async fn run(
    url: &str,
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
    selection: &Selection,
) {
    println!(
        "\ngroup commit: Limiter::check batched (RedisOptions::with_batching(true)) against unbatched (false) and the \
         ceiling, in turn in each of {} rounds; {:?} measured per case; calls in flight {:?}; {} users",
        options.rounds,
        options.window,
        selection.in_flight,
        load::USERS
    );
    let (on_store, off_store) = stores(url).await;
    let mut cells = Vec::new();
    for algo in crate::cases::algorithms().into_iter().filter(|a| selection.algorithm.is_none_or(|k| k == a.kind)) {
        for &in_flight in &selection.in_flight {
            let cell = measure_cell(&algo, in_flight, &on_store, &off_store, admin, con, options).await;
            print_lines(&cell);
            cells.push(cell);
        }
    }
    print_table(&cells);
    print_targets(&cells);
}

async fn measure_cell(
    algo: &crate::cases::Algo,
    in_flight: usize,
    on_store: &Store,
    off_store: &Store,
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
) -> Cell {
    let (mut on, mut off, mut ceiling) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..options.rounds {
        // Every other round in reverse, as the other Redis cases run, so
        // neither store is always the one that follows the other's load.
        let run = options.run();
        if round % 2 == 0 {
            on.push(measure_check(algo, on_store, in_flight, admin, run).await);
            off.push(measure_check(algo, off_store, in_flight, admin, run).await);
            ceiling.push(crate::measure_ceiling(admin, con, in_flight, run).await);
        } else {
            ceiling.push(crate::measure_ceiling(admin, con, in_flight, run).await);
            off.push(measure_check(algo, off_store, in_flight, admin, run).await);
            on.push(measure_check(algo, on_store, in_flight, admin, run).await);
        }
    }
    let p50 = |runs: &[Measured]| runs.iter().map(|m| Measured { ops_per_s: m.p50_us, ..*m }).collect::<Vec<_>>();
    let off_p50s = off.iter().map(|m| m.p50_us);
    let off_p50_range = (off_p50s.clone().fold(f64::INFINITY, f64::min), off_p50s.fold(0.0, f64::max));
    Cell {
        kind: algo.kind,
        in_flight,
        on_off: median_ratio(&on, &off),
        on_ceiling: median_ratio(&on, &ceiling),
        off_ceiling: median_ratio(&off, &ceiling),
        p50_on_off: median_ratio(&p50(&on), &p50(&off)),
        off_p50_range,
        on: Measured::mean(&on),
        off: Measured::mean(&off),
        ceiling: Measured::mean(&ceiling),
    }
}

/// `Limiter::check` of cost 1 on `store`, `in_flight` calls at a time on distinct users.
async fn measure_check(
    algo: &crate::cases::Algo,
    store: &Store,
    in_flight: usize,
    admin: &mut MultiplexedConnection,
    options: Options,
) -> Measured {
    let limiter = Limiter::new(format!("bench.batch.{}", algo.kind.name()), algo.policy.clone(), store);
    let keys = Arc::new((0..load::USERS).map(|u| format!("user:{u}")).collect::<Vec<_>>());
    flush(admin).await;
    drive(admin, in_flight, options.warmup, options.window, move |task, n| {
        let (limiter, keys) = (limiter.clone(), keys.clone());
        async move {
            let key = &keys[load::user_among(task, n, in_flight) as usize];
            limiter.check(key, 1).await.expect("Limiter::check");
        }
    })
    .await
}

fn print_lines(cell: &Cell) {
    let name = cell.kind.name();
    let line = |which: &str, m: &Measured, ratios: String| {
        println!(
            "bench case=batch/{name}/{which}/{} ops_per_s={:.0} p50_us={:.0} p99_us={:.0} client_us_per_op={:.2} \
             server_us_per_decision={:.2} server_cpu_us_per_op={:.2} evalsha_per_decision={:.3}{ratios}",
            cell.in_flight,
            m.ops_per_s,
            m.p50_us,
            m.p99_us,
            m.cpu_us_per_op,
            m.server_us_per_decision,
            m.server_cpu_us_per_op,
            m.evalsha_per_op
        )
    };
    line(
        "on",
        &cell.on,
        format!(
            " ratio_to_off={:.3} ratio_to_ceiling={:.3} p50_to_off={:.3}",
            cell.on_off, cell.on_ceiling, cell.p50_on_off
        ),
    );
    line("off", &cell.off, format!(" ratio_to_ceiling={:.3}", cell.off_ceiling));
    line("ceiling", &cell.ceiling, String::new());
}

fn print_table(cells: &[Cell]) {
    println!(
        "\n{:<14} {:>5} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "algo",
        "in fl",
        "on /s",
        "off /s",
        "on÷off",
        "on÷ceil",
        "off÷ceil",
        "p50 on",
        "p50 off",
        "p99 on",
        "p99 off",
        "cli µs on",
        "cli µs off",
        "srv µs on",
        "srv µs off",
        "cpu µs on",
        "cpu µs off",
    );
    for c in cells {
        println!(
            "{:<14} {:>5} {:>9.0} {:>9.0} {:>8.3} {:>8.3} {:>8.3} {:>7.0} {:>7.0} {:>7.0} {:>7.0} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            c.kind.name(),
            c.in_flight,
            c.on.ops_per_s,
            c.off.ops_per_s,
            c.on_off,
            c.on_ceiling,
            c.off_ceiling,
            c.on.p50_us,
            c.off.p50_us,
            c.on.p99_us,
            c.off.p99_us,
            c.on.cpu_us_per_op,
            c.off.cpu_us_per_op,
            c.on.server_us_per_decision,
            c.off.server_us_per_decision,
            c.on.server_cpu_us_per_op,
            c.off.server_cpu_us_per_op,
        );
    }
    println!(
        "(cli µs: this process's CPU per decision; srv µs: EVALSHA's total usec in INFO commandstats ÷ decisions made; \
         cpu µs: redis-server's CPU (INFO cpu) ÷ decisions made; ratios: medians of the rounds' own)"
    );
    for c in cells {
        println!(
            "  {:<14} {:>4} in flight: ceiling {:>8.0}/s p50 {:.0} µs, redis-server CPU {:.2} µs per decision; \
             batched {:.3} EVALSHA per decision",
            c.kind.name(),
            c.in_flight,
            c.ceiling.ops_per_s,
            c.ceiling.p50_us,
            c.ceiling.server_cpu_us_per_op,
            c.on.evalsha_per_op
        );
    }
}

fn print_targets(cells: &[Cell]) {
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!("\nbatching targets");
    for c in cells.iter().filter(|c| c.in_flight == 64) {
        let targeted = TARGETED.contains(&c.kind);
        let (speedup, ceiling) = (c.on_off >= TARGET_SPEEDUP, c.on_ceiling >= 1.0);
        println!(
            "  {:<14} 64 in flight: batched ÷ unbatched {:.3} (>= {TARGET_SPEEDUP}): {}; batched ÷ ceiling {:.3} (>= 1): {}",
            c.kind.name(),
            c.on_off,
            if targeted { verdict(speedup) } else { "no target" },
            c.on_ceiling,
            if targeted { verdict(ceiling) } else { "no target" },
        );
    }
    for c in cells.iter().filter(|c| c.in_flight <= 4) {
        println!(
            "  {:<14} {} in flight: p50 batched ÷ unbatched {:.3} (<= {P50_NOISE}; unbatched rounds' p50 {:.0} to {:.0} µs): {}",
            c.kind.name(),
            c.in_flight,
            c.p50_on_off,
            c.off_p50_range.0,
            c.off_p50_range.1,
            verdict(c.p50_on_off <= P50_NOISE)
        );
    }
}
