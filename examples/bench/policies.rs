//! Limits as data: `Limiter::check` of one fixed limiter against
//! `limiter.with_policy(&policy).check(..)` where each of the 10,000 users
//! has a policy of their own (the same algorithm, other numbers, read from
//! a table built before the run, as a service reads its customers' quotas),
//! at 64 calls in flight, in turn in every round. Then, for the bucket
//! families, the raw script with the policy's numbers written into its
//! text against the same script reading them from ARGV, to show what
//! reading them costs Redis.

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
/// (limits of 1,000 to 1,999 a second), so no call is denied. `whole_us`:
/// the buckets' rates are among those that reduce to whole µs per permit
/// (n = 1), as the fixed form's `1000/1s` does, so both take the same
/// arithmetic path in the scripts; their capacities still differ per user.
fn policy_of(kind: AlgorithmKind, u: u64, whole_us: bool) -> Policy {
    let limit = 1000 + u % 1000;
    let rate = match whole_us {
        true => format!("{}/1s", [1000, 1250, 1600, 2000][(u % 4) as usize]),
        false => format!("{limit}/1s"),
    };
    match kind {
        AlgorithmKind::FixedWindow => Policy::fixed_window(&format!("{limit}/1s")),
        AlgorithmKind::SlidingWindow => Policy::sliding_window(&format!("{limit}/1s"), "100ms"),
        AlgorithmKind::SlidingLog => Policy::sliding_log(&format!("{limit}/1s")),
        AlgorithmKind::TokenBucket => Policy::token_bucket(limit, &rate),
        AlgorithmKind::LeakyBucket => Policy::leaky_bucket(limit, &rate),
        AlgorithmKind::Gcra => Policy::gcra(&rate, limit - 1),
        AlgorithmKind::Concurrency => Policy::concurrency(limit, "30s"),
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
        let buckets =
            !matches!(algo.kind, AlgorithmKind::FixedWindow | AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog);
        let (mut fixed, mut per_user, mut whole) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..options.rounds {
            let run = options.run();
            let mut order = vec![(0, Some(&algo.policy), false), (1, None, false)];
            if buckets {
                order.push((2, None, true));
            }
            if round % 2 == 1 {
                order.reverse();
            }
            for (which, policy, whole_us) in order {
                let measured = measure(algo.kind, policy, whole_us, store, admin, run).await;
                [&mut fixed, &mut per_user, &mut whole][which].push(measured);
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
        if buckets {
            let (ratio, w) = (median_ratio(&whole, &fixed), Measured::mean(&whole));
            println!(
                "bench case=policies/{name}/whole_us per_user_ops_per_s={:.0} ratio={ratio:.3} \
                 per_user_server_cpu_us_per_op={:.2} server_cpu_ratio={:.3} per_user_client_us_per_op={:.2}",
                w.ops_per_s,
                w.server_cpu_us_per_op,
                median_ratio(&cpu(&whole), &cpu(&fixed)),
                w.cpu_us_per_op
            );
        }
        if let Some((data, written)) = written_in_against_data(&algo, admin, options).await {
            println!(
                "bench case=policies/{name}/raw data_server_us_per_call={:.2} written_in_server_us_per_call={:.2} \
                 data_ops_per_s={:.0} written_in_ops_per_s={:.0} written_in_gain={:.3}",
                data.server_us_per_call,
                written.server_us_per_call,
                data.ops_per_s,
                written.ops_per_s,
                data.server_us_per_call / written.server_us_per_call - 1.0
            );
        }
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

/// `fixed`: every call under that policy; `None`: each user's own
/// ([`policy_of`], `whole_us`).
async fn measure(
    kind: AlgorithmKind,
    fixed: Option<&Policy>,
    whole_us: bool,
    store: &Store,
    admin: &mut MultiplexedConnection,
    options: Options,
) -> Measured {
    let base = fixed.cloned().unwrap_or_else(|| policy_of(kind, 0, whole_us));
    let limiter = Limiter::new(format!("bench.policies.{}", kind.name()), base, store);
    let per_user = fixed.is_none();
    let table =
        Arc::new((0..load::USERS).map(|u| (format!("user:{u}"), policy_of(kind, u, whole_us))).collect::<Vec<_>>());
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

/// For a bucket family: the raw script reading its numbers from ARGV, and
/// the same script with them written into its text (ARGV 1 left empty),
/// in turn in every round: their means. `None` for the window families.
async fn written_in_against_data(
    algo: &crate::cases::Algo,
    admin: &mut MultiplexedConnection,
    options: Options,
) -> Option<(Measured, Measured)> {
    let reader = "struct_unpack('<ddd', policy)";
    let data_source = redlimit::__private::script_source(&algo.policy, true);
    if !data_source.contains(reader) {
        return None;
    }
    let numbers = redlimit::__private::policy_argument(&algo.policy, true);
    let read: Vec<String> =
        numbers.chunks(8).map(|b| format!("{}", f64::from_le_bytes(b.try_into().expect("8 bytes")) as u64)).collect();
    let written_source = data_source.replace(reader, &read.join(", "));
    let data = Arc::new((redis::Script::new(&data_source), numbers));
    let written = Arc::new((redis::Script::new(&written_source), Vec::new()));
    let (mut with_data, mut with_written) = (Vec::new(), Vec::new());
    for round in 0..options.rounds {
        let run = options.run();
        let order = if round % 2 == 0 { [&data, &written] } else { [&written, &data] };
        for form in order {
            let measured = raw(form.clone(), admin, run).await;
            if Arc::ptr_eq(form, &data) { &mut with_data } else { &mut with_written }.push(measured);
        }
    }
    Some((Measured::mean(&with_data), Measured::mean(&with_written)))
}

/// One script and its first ARGV, called raw at 64 in flight over the users.
async fn raw(form: Arc<(redis::Script, Vec<u8>)>, admin: &mut MultiplexedConnection, options: Options) -> Measured {
    let con = admin.clone();
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (form, mut con) = (form.clone(), con.clone());
        async move {
            let key = format!("raw:{}", load::user(task, n));
            let _: Vec<u8> = form.0.key(key).arg(&form.1).invoke_async(&mut con).await.expect("raw EVALSHA");
        }
    })
    .await
}
