//! Prefetch on one hot key: `Limiter::check` at 64 calls in flight, all on
//! one key, with prefetch (k = 100) against without, in turn in every round,
//! on the default (batching) store. Decisions per second, and redis-server's
//! CPU per decision (`INFO cpu` before and after ÷ decisions made); the
//! limits are far above what the run reaches, so every call is admitted and
//! both sides do the same work per decision.
//!
//! `REDLIMIT_BENCH_PREFETCH_K` sets another k: one so large that refills
//! are rare measures how fast this process spends, apart from how often
//! every call waits for a refill's round trip (the p99 shows those waits).

use crate::load::{drive, Measured};
use crate::{flush, median_ratio, Options};
use redis::aio::MultiplexedConnection;
use redlimit::{Limiter, Policy, PrefetchStats, Store};

/// k unless `REDLIMIT_BENCH_PREFETCH_K` sets another.
const K: u64 = 100;
const IN_FLIGHT: usize = 64;
/// On ÷ off decisions per second, and off ÷ on Redis CPU per decision, asked of prefetch.
const TARGET: f64 = 10.0;

fn policies() -> Vec<(&'static str, Policy)> {
    vec![
        ("fixed_window", Policy::fixed_window("1000000000/1h").unwrap()),
        ("token_bucket", Policy::token_bucket(1_000_000_000, "1000000000/1s").unwrap()),
        ("gcra", Policy::gcra("1000000000/1s", 999_999_999).unwrap()),
    ]
}

/// Runs the section and prints its lines and targets.
pub async fn run(store: &Store, admin: &mut MultiplexedConnection, options: Options) {
    let k = match std::env::var("REDLIMIT_BENCH_PREFETCH_K") {
        Ok(k) => k.parse().expect("REDLIMIT_BENCH_PREFETCH_K is a number of permits"),
        Err(_) => K,
    };
    println!(
        "\nprefetch: Limiter::check of one hot key at {IN_FLIGHT} calls in flight, with_prefetch({k}) against none, in \
         turn in each of {} rounds; {:?} measured per case; load average {}",
        options.rounds,
        options.window,
        crate::local::load_average()
    );
    let mut met = true;
    for (name, policy) in policies() {
        let (mut on, mut off) = (Vec::new(), Vec::new());
        let mut stats = [0u64; 4];
        for round in 0..options.rounds {
            let run = options.run();
            if round % 2 == 1 {
                off.push(measure(store, &policy, None, admin, run).await);
            }
            let limiter = Limiter::new(format!("bench.prefetch.{name}.{round}"), policy.clone(), store);
            let limiter = limiter.with_prefetch(k).expect("this algorithm takes prefetch");
            on.push(measure(store, &policy, Some(&limiter), admin, run).await);
            let PrefetchStats { prefetched, spent, returned, wasted, .. } = limiter.prefetch_stats();
            for (sum, n) in stats.iter_mut().zip([prefetched, spent, returned, wasted]) {
                *sum += n;
            }
            if round % 2 == 0 {
                off.push(measure(store, &policy, None, admin, run).await);
            }
        }
        let speedup = median_ratio(&on, &off);
        let (on, off) = (Measured::mean(&on), Measured::mean(&off));
        let cpu = on.server_cpu_us_per_op / off.server_cpu_us_per_op;
        let [prefetched, spent, returned, wasted] = stats;
        println!(
            "{name}: on {:.0}/s, off {:.0}/s, ×{speedup:.1}; redis cpu µs/decision on {:.3}, off {:.3} (×{cpu:.3}); \
             evalsha/decision on {:.4}, off {:.3}; p50 µs on {:.0}, off {:.0}; p99 µs on {:.0}, off {:.0}; permits \
             prefetched {prefetched}, spent {spent}, returned {returned}, wasted {wasted}",
            on.ops_per_s,
            off.ops_per_s,
            on.server_cpu_us_per_op,
            off.server_cpu_us_per_op,
            on.evalsha_per_op,
            off.evalsha_per_op,
            on.p50_us,
            off.p50_us,
            on.p99_us,
            off.p99_us,
        );
        met &= speedup >= TARGET && cpu <= 1.0 / TARGET;
    }
    println!(
        "target: prefetch ≥ {TARGET}x decisions/s and ≤ 1/{TARGET} of Redis's CPU per decision: {}",
        if met { "met" } else { "NOT met" }
    );
}

/// One run of `Limiter::check` on one key: through `prefetched`, or a fresh
/// limiter without prefetch when `None`.
async fn measure(
    store: &Store,
    policy: &Policy,
    prefetched: Option<&Limiter>,
    admin: &mut MultiplexedConnection,
    options: Options,
) -> Measured {
    let limiter = prefetched.cloned().unwrap_or_else(|| Limiter::new("bench.prefetch.off", policy.clone(), store));
    flush(admin).await;
    drive(admin, IN_FLIGHT, options.warmup, options.window, move |_, _| {
        let limiter = limiter.clone();
        async move {
            limiter.check("hot", 1).await.expect("Limiter::check");
        }
    })
    .await
}
