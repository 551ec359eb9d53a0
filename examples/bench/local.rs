//! What runs in this process alone: the deny cache under a flood, and the
//! memory backend next to governor's keyed limiter.

use crate::load::{evalsha_stats, reset_stats};
use crate::Options;
use governor::{Quota, RateLimiter};
use redis::aio::MultiplexedConnection;
use redlimit::__private::{Answer, Backend, Binding, Bound, BoxFuture, Call, MemoryBackend, Outcome};
use redlimit::{Clock, Error, Limiter, Policy, ServerClock, Store};
use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The machine, the server and the date, as BENCHMARKS.md records them.
pub async fn print_machine(admin: &mut MultiplexedConnection) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map_or("unknown", |m| m.trim_start_matches([' ', '\t', ':']));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let info: String = redis::cmd("INFO").arg("server").query_async(admin).await.expect("INFO server");
    let version = info.lines().find_map(|l| l.strip_prefix("redis_version:")).unwrap_or("unknown").trim().to_string();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("machine: {cores} cores, {model}; redis-server {version}; {date}; load average {}", load_average());
}

/// `/proc/loadavg`'s first three fields: how busy the machine was.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Calls `f` in a loop on this thread for `window`; calls per second.
async fn per_second<F, Fut>(window: Duration, mut f: F) -> f64
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let started = Instant::now();
    let mut calls = 0u64;
    loop {
        for _ in 0..1024 {
            f(calls).await;
            calls += 1;
        }
        if started.elapsed() >= window {
            return calls as f64 / started.elapsed().as_secs_f64();
        }
    }
}

/// A client denied for an hour keeps calling: with the deny cache its
/// denials cost no round trip.
pub async fn flood(store: &Store, admin: &mut MultiplexedConnection) {
    println!("\ndeny cache: one client, denied for an hour, calling in a loop on one thread");
    let policy = Policy::gcra("1/1h", 0).unwrap();
    let window = Duration::from_secs(1);

    let limiter = Limiter::new("bench.flood", policy.clone(), store);
    assert!(limiter.check("flooder", 1).await.unwrap().allowed);
    assert!(!limiter.check("flooder", 1).await.unwrap().allowed, "the store's own denial, now remembered");
    reset_stats(admin).await;
    let rate = per_second(window, |_| async {
        let d = limiter.check("flooder", 1).await.unwrap();
        assert!(!black_box(d).allowed);
    })
    .await;
    let calls = evalsha_stats(admin).await.calls;
    let through_limiter = rate;
    println!("  Limiter::check       {rate:>12.0} denials/s   EVALSHA calls during the flood: {calls}");
    println!("bench case=deny_cache/limiter denials_per_s={rate:.0} evalsha_calls={calls}");

    assert!(crate::cases::flooded().await.is_ok());
    assert!(crate::cases::flooded().await.is_err());
    reset_stats(admin).await;
    let rate = per_second(window, |_| async {
        assert!(black_box(crate::cases::flooded().await).is_err());
    })
    .await;
    let calls = evalsha_stats(admin).await.calls;
    println!("  #[rate_limit] fn     {rate:>12.0} denials/s   EVALSHA calls during the flood: {calls}");
    println!("bench case=deny_cache/macro denials_per_s={rate:.0} evalsha_calls={calls}");

    let off = Limiter::new("bench.flood.off", policy, store).with_deny_cache(false);
    off.check("flooder", 1).await.unwrap();
    reset_stats(admin).await;
    let rate = per_second(window / 2, |_| async {
        assert!(!off.check("flooder", 1).await.unwrap().allowed);
    })
    .await;
    let calls = evalsha_stats(admin).await.calls;
    println!("  cache turned off     {rate:>12.0} denials/s   EVALSHA calls: {calls} (one per call)");
    let verdict = if through_limiter >= 5e6 { "met" } else { "MISSED" };
    println!("  target >= 5 000 000 denials/s on one thread (Limiter::check): {verdict}");
}

/// The memory section, run by a process of its own (`bench --only memory`,
/// with this run's `--secs` and `--rounds`), its output passed through.
/// Alone, it measures only itself: none of the Redis sections' connection
/// tasks or server is left running beside it, and the global store the
/// `#[rate_limit]` row needs is `Store::memory()`.
pub fn memory_backend_in_own_process(options: Options) {
    let exe = std::env::current_exe().expect("the bench's own path");
    let secs = (options.window.as_secs_f64()).to_string();
    let status = std::process::Command::new(exe)
        .args(["--only", "memory", "--secs", &secs, "--rounds", &options.rounds.to_string()])
        .status()
        .expect("run the memory section");
    assert!(status.success(), "the memory section failed: {status}");
}

/// ns per check of the memory backend for every algorithm, each measured
/// in turn with governor's keyed GCRA on the same keys, round after round,
/// so a change in the machine's load hits both alike; each figure is the
/// median of its rounds, each ratio the median of the rounds' own ratios.
/// Every case runs twice a round, its keys called in sequence and in one
/// shuffled order (a fixed seed, the same each run), each order's ratios
/// to governor's in that order. A `#[rate_limit]` row is measured when the
/// global store is in memory.
pub async fn memory_backend(options: Options) {
    let rounds = 9;
    println!(
        "\nmemory backend, one thread, 10 000 keys in sequence and shuffled, nearly every call admitted; \
         in turn with governor, median of {rounds} rounds"
    );
    let window = options.run().window.min(Duration::from_secs(1)) / 3;
    let keys: Vec<String> = (0..10_000).map(|u| format!("user:{u}")).collect();
    // governor's rate and burst (1 000 000/s, 1 000 000 at once) for gcra.
    let gcra = Policy::gcra("1000000/1s", 999_999).unwrap();
    let policies = [
        Policy::fixed_window("1000000/1s").unwrap(),
        Policy::sliding_window("1000000/1s", "100ms").unwrap(),
        Policy::sliding_log("1000/1s").unwrap(),
        Policy::token_bucket(1_000_000, "1000000/1s").unwrap(),
        Policy::leaky_bucket(1_000_000, "1000000/1s").unwrap(),
        gcra.clone(),
    ];
    let global_in_memory = redlimit::global().await.is_ok_and(|store| store.kind() == "memory");
    let mut orders: Vec<Order> = [("sequence", (0..10_000).collect()), ("shuffled", shuffled(10_000))]
        .into_iter()
        .map(|(name, order)| {
            let mut rows: Vec<Row> = policies
                .iter()
                .map(|p| {
                    let limiter = Limiter::new("bench.memory", p.clone(), &Store::memory());
                    Row::new(p.algorithm().name(), "Limiter::check", limiter)
                })
                .collect();
            // Where the time goes, for gcra: the limiter on a store that answers at once.
            let instant = Limiter::new("bench.instant", gcra.clone(), &Store::from_backend(Arc::new(AnswersAtOnce)));
            rows.push(Row::new(
                "-",
                "Limiter::check on a store that answers at once: the pipeline's own cost",
                instant,
            ));
            Order { name, order, governor_ns: Vec::new(), rows, backend: Row::default(), macro_row: Row::default() }
        })
        .collect();
    // And the store's own synchronous call (no limiter, no future).
    let bound = MemoryBackend::new().bind(Binding {
        prefix: "redlimit",
        name: "bench.memory",
        policy: &gcra,
        server_clock: true,
    });

    let governor = RateLimiter::keyed(Quota::per_second(NonZeroU32::new(1_000_000).unwrap()));
    for _ in 0..rounds {
        for order in &mut orders {
            let at = |i: u64| order.order[(i % 10_000) as usize] as usize;
            let rate = per_second(window, |i| {
                let result = governor.check_key(&keys[at(i)]);
                async move {
                    black_box(result).ok();
                }
            })
            .await;
            let theirs = 1e9 / rate;
            order.governor_ns.push(theirs);
            for row in &mut order.rows {
                let limiter = row.limiter.as_ref().expect("a limiter row");
                let rate = per_second(window, |i| {
                    let key = &keys[at(i)];
                    async move {
                        black_box(limiter.check(key, 1).await.unwrap());
                    }
                })
                .await;
                row.add(1e9 / rate, theirs);
            }
            let rate = per_second(window, |i| {
                black_box(matches!(bound.decide(Call::check(keys[at(i)].as_bytes(), 1), &ServerClock), Answer::Now(_)));
                async {}
            })
            .await;
            order.backend.add(1e9 / rate, theirs);
            if global_in_memory {
                let rate = per_second(window, |i| async move {
                    assert!(black_box(crate::cases::memory_gcra(at(i) as u64).await).is_ok());
                })
                .await;
                order.macro_row.add(1e9 / rate, theirs);
            }
        }
    }
    let verdict = |r: f64, target: f64| if r <= target { "met" } else { "MISSED" };
    for Order { name: order, governor_ns, rows, backend, macro_row, .. } in &mut orders {
        println!("  keys {order}:");
        let ns_governor = median(governor_ns);
        println!("  {:<15} {ns_governor:>8.0} ns/check  (governor keyed GCRA, same keys)", "governor");
        println!("bench case=governor/keyed order={order} ns_per_check={ns_governor:.0}");
        for row in rows.iter_mut() {
            let (ns, ratio) = row.medians();
            println!("  {:<15} {ns:>8.0} ns/check  {ratio:>5.2}× governor  ({})", row.name, row.path);
            if row.name != "-" {
                println!(
                    "bench case={}/memory order={order} ns_per_check={ns:.0} ratio_to_governor={ratio:.2}",
                    row.name
                );
            } else {
                println!("bench case=limiter_overhead/instant_backend order={order} ns_per_check={ns:.0} ratio_to_governor={ratio:.2}");
            }
        }
        let (ns_backend, backend_ratio) = backend.medians();
        println!(
            "  {:<15} {ns_backend:>8.0} ns/check  {backend_ratio:>5.2}× governor  (the memory store's bound decide)",
            "gcra"
        );
        println!(
            "bench case=gcra/memory_backend_in_turn order={order} ns_per_check={ns_backend:.0} ratio_to_governor={backend_ratio:.2}"
        );
        let gcra_ratio = rows.iter_mut().find(|row| row.name == "gcra").map_or(f64::NAN, |row| row.medians().1);
        println!(
            "  gcra ÷ governor, through Limiter::check, keys {order}: {gcra_ratio:.2} (target <= 1.2): {}",
            verdict(gcra_ratio, 1.2)
        );
        if global_in_memory {
            let (ns_macro, macro_ratio) = macro_row.medians();
            println!(
                "  {:<15} {ns_macro:>8.0} ns/check  {macro_ratio:>5.2}× governor  (a #[rate_limit] fn on Store::memory())",
                "gcra"
            );
            println!(
                "bench case=gcra/memory_macro_in_turn order={order} ns_per_check={ns_macro:.0} ratio_to_governor={macro_ratio:.2}"
            );
            println!(
                "  gcra ÷ governor, through a #[rate_limit] fn, keys {order}: {macro_ratio:.2} (target <= 1.6): {}",
                verdict(macro_ratio, 1.6)
            );
        }
    }
}

/// One order the memory section calls its keys in, and its rows' figures.
struct Order {
    name: &'static str,
    /// The key's index for each call, `i % 10 000`.
    order: Vec<u32>,
    governor_ns: Vec<f64>,
    rows: Vec<Row>,
    backend: Row,
    macro_row: Row,
}

/// `0..n` in an order fixed by a seed: the same permutation every run, so
/// runs compare, unlike the order the keys were made in.
fn shuffled(n: u32) -> Vec<u32> {
    use rand::{seq::SliceRandom, SeedableRng};
    let mut order: Vec<u32> = (0..n).collect();
    order.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(0x5eed_0041));
    order
}

/// One row of the memory section: its figures round by round, and each
/// round's ratio to governor's.
#[derive(Default)]
struct Row {
    name: &'static str,
    path: &'static str,
    limiter: Option<Limiter>,
    ns: Vec<f64>,
    ratios: Vec<f64>,
}

impl Row {
    fn new(name: &'static str, path: &'static str, limiter: Limiter) -> Row {
        Row { name, path, limiter: Some(limiter), ..Row::default() }
    }

    fn add(&mut self, ns: f64, governor_ns: f64) {
        self.ns.push(ns);
        self.ratios.push(ns / governor_ns);
    }

    /// The median ns and the median ratio.
    fn medians(&mut self) -> (f64, f64) {
        (median(&mut self.ns), median(&mut self.ratios))
    }
}

/// The middle value (sorts `values`).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A backend that admits everything at once, to measure what the limiter
/// itself costs per call.
pub(crate) struct AnswersAtOnce;

/// The bound store of [`AnswersAtOnce`]: its answers are decisions under the bound policy.
struct AnsweringAtOnce(Policy);

impl Backend for AnswersAtOnce {
    fn bind(&self, binding: Binding<'_>) -> Arc<dyn Bound> {
        Arc::new(AnsweringAtOnce(binding.policy.clone()))
    }
    fn kind(&self) -> &'static str {
        "instant"
    }
}

impl Bound for AnsweringAtOnce {
    fn decide<'a>(&'a self, call: Call<'_>, _: &dyn Clock) -> Answer<'a> {
        black_box(call);
        Answer::Now(Ok(Outcome {
            allowed: true,
            limit: 1000,
            remaining: 999,
            reset_after_us: 1000,
            retry_after_us: None,
            violated: 0,
            now_us: 0,
            quotas: Vec::new(),
        }
        .into_decision(&self.0)))
    }
    fn reset<'a>(&'a self, _: &[u8]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }
    fn remote(&self) -> bool {
        false
    }
}
