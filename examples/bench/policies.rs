//! Limits as data: `Limiter::check` of one fixed limiter against
//! `limiter.with_policy(&policy).check(..)` where each of the 10,000 users
//! has a policy of their own (the same algorithm, other numbers, read from
//! a table built before the run, as a service reads its customers' quotas),
//! at 64 calls in flight, in turn in every round.

use crate::load::{self, drive, Measured};
use crate::{flush, median_ratio, Options};
use redis::aio::MultiplexedConnection;
use redlimit::{AlgorithmKind, Limiter, Policy, Store};
use std::sync::Arc;

/// Decisions/s of the per-user form ÷ the fixed form the issue asks for.
const TARGET_THROUGHPUT: f64 = 0.95;
/// How much more Redis CPU per decision the per-user form may cost.
const TARGET_SERVER_CPU: f64 = 1.05;

/// User `u`'s policy: `kind`, with numbers of its own near the bench's
/// (limits of 1,000 to 1,999 a second), so no call is denied.
fn policy_of(kind: AlgorithmKind, u: u64) -> Policy {
    let limit = 1000 + u % 1000;
    match kind {
        AlgorithmKind::FixedWindow => Policy::fixed_window(&format!("{limit}/1s")),
        AlgorithmKind::SlidingWindow => Policy::sliding_window(&format!("{limit}/1s"), "100ms"),
        AlgorithmKind::SlidingLog => Policy::sliding_log(&format!("{limit}/1s")),
        AlgorithmKind::TokenBucket => Policy::token_bucket(limit, &format!("{limit}/1s")),
        AlgorithmKind::LeakyBucket => Policy::leaky_bucket(limit, &format!("{limit}/1s")),
        AlgorithmKind::Gcra => Policy::gcra(&format!("{limit}/1s"), limit - 1),
    }
    .expect("a valid policy")
}

pub async fn run(store: &Store, admin: &mut MultiplexedConnection, options: Options, only: Option<AlgorithmKind>) {
    println!(
        "\nlimits as data: one fixed limiter against a policy per user ({} users, each their own numbers), \
         Limiter::check at {} in flight, {} rounds of {:?}",
        load::USERS,
        load::IN_FLIGHT,
        options.rounds,
        options.window
    );
    println!(
        "{:<14} {:>10} {:>10} {:>8} {:>12} {:>12} {:>8}",
        "algo", "fixed /s", "per-user /s", "ratio", "fixed srv µs", "per-user µs", "ratio"
    );
    for algo in crate::cases::algorithms().into_iter().filter(|a| only.is_none_or(|k| k == a.kind)) {
        let (mut fixed, mut per_user) = (Vec::new(), Vec::new());
        for round in 0..options.rounds {
            let run = options.run();
            if round % 2 == 0 {
                fixed.push(measure(algo.kind, Some(&algo.policy), store, admin, run).await);
                per_user.push(measure(algo.kind, None, store, admin, run).await);
            } else {
                per_user.push(measure(algo.kind, None, store, admin, run).await);
                fixed.push(measure(algo.kind, Some(&algo.policy), store, admin, run).await);
            }
        }
        let throughput = median_ratio(&per_user, &fixed);
        let cpu = |runs: &[Measured]| {
            runs.iter().map(|m| Measured { ops_per_s: m.server_cpu_us_per_op, ..*m }).collect::<Vec<_>>()
        };
        let server_cpu = median_ratio(&cpu(&per_user), &cpu(&fixed));
        let (f, p) = (Measured::mean(&fixed), Measured::mean(&per_user));
        let name = algo.kind.name();
        println!(
            "{name:<14} {:>10.0} {:>10.0} {throughput:>8.3} {:>12.2} {:>12.2} {server_cpu:>8.3}",
            f.ops_per_s, p.ops_per_s, f.server_cpu_us_per_op, p.server_cpu_us_per_op
        );
        println!(
            "bench case=policies/{name} fixed_ops_per_s={:.0} per_user_ops_per_s={:.0} ratio={throughput:.3} \
             fixed_server_cpu_us_per_op={:.2} per_user_server_cpu_us_per_op={:.2} server_cpu_ratio={server_cpu:.3} \
             fixed_client_us_per_op={:.2} per_user_client_us_per_op={:.2} throughput_target_met={} server_cpu_target_met={}",
            f.ops_per_s,
            p.ops_per_s,
            f.server_cpu_us_per_op,
            p.server_cpu_us_per_op,
            f.cpu_us_per_op,
            p.cpu_us_per_op,
            throughput >= TARGET_THROUGHPUT,
            server_cpu <= TARGET_SERVER_CPU
        );
    }
}

/// `fixed`: every call under that policy; `None`: each user's own.
async fn measure(
    kind: AlgorithmKind,
    fixed: Option<&Policy>,
    store: &Store,
    admin: &mut MultiplexedConnection,
    options: Options,
) -> Measured {
    let base = fixed.cloned().unwrap_or_else(|| policy_of(kind, 0));
    let limiter = Limiter::new(format!("bench.policies.{}", kind.name()), base, store);
    let per_user = fixed.is_none();
    let table = Arc::new((0..load::USERS).map(|u| (format!("user:{u}"), policy_of(kind, u))).collect::<Vec<_>>());
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (limiter, table) = (limiter.clone(), table.clone());
        async move {
            let (key, policy) = &table[load::user(task, n) as usize];
            let decision = match per_user {
                true => limiter.with_policy(policy).check(key, 1).await,
                false => limiter.check(key, 1).await,
            };
            decision.expect("Limiter::check");
        }
    })
    .await
}
