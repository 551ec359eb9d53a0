#![cfg(feature = "redis")]
//! Where the features meet: one randomized, seeded run per algorithm family,
//! on the memory store and on this test's own Redis from several processes
//! (this binary again, running only `child`), on the clock that moves (the
//! system clock in memory, Redis's `TIME`). Each call draws its key, its plan
//! (`Limiter::with_policy`: capacities, rates, refills, strategies; for
//! windows, also a class of a plan with headroom, `Limiter::with_priority`,
//! bound by its own class's share), its cost, whether
//! it is refunded later (soon, or after its window ended or its bucket
//! refilled), whether it reserves and settles below or above its estimate
//! (as late; an overage is a charge the model counts when it was made,
//! never judged), whether it is a dry-run trial and whether it goes through a
//! prefetching limiter (`redlimit_test_support::meet_calls`). Every decided
//! call is recorded (`allowed`, cost, policy, `decided_at`, refunded or not)
//! and replayed against the model of `redlimit_test_support::meet`, which
//! must find no call over-admitted. Concurrency permits are held, dropped,
//! released, cancelled mid-acquisition and stopped past their lease
//! (`meet_holders`): never more than the limit at once, and a holder whose
//! permit was taken while it was stopped is told.
//!
//! `REDLIMIT_MEET_WITHOUT=refunds` (or `plans`) leaves a feature out, to
//! tell which one an over-admission comes from.
//!
//! The run is a count of decisions (`REDLIMIT_MEET_DECISIONS` per part and
//! store, default `DEFAULT_DECISIONS`); pacing sleeps only spread the calls
//! over time so that windows end and buckets refill under them. The seed is
//! printed, and `REDLIMIT_MEET_SEED` draws the same calls again.

use redlimit::{RedisOptions, Store, SystemClock, DEFAULT_PREFETCH_TTL};
use redlimit_test_support::child_process::{self, TestChild};
use redlimit_test_support::meet::{self, Call, Excess, Hold, Strategy};
use redlimit_test_support::meet_calls::{plans, process, FAST, INTERVAL_KEYS, K, MIXED, MS, RATE};
use redlimit_test_support::meet_holders::LIMIT;
use redlimit_test_support::redis_server::RedisServer;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CHILD_VAR: &str = "REDLIMIT_MEET_CHILD";
const PROCESSES: usize = 3;
/// Worker tasks in this process on the memory store, and in each child on Redis.
const TASKS: usize = 4;
const CHILD_TASKS: usize = 2;
const DEFAULT_DECISIONS: usize = 2400;

fn decisions() -> usize {
    std::env::var("REDLIMIT_MEET_DECISIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_DECISIONS)
}

/// One seed for every part of this run.
fn seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let drawn = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos() as u64;
    *SEED.get_or_init(|| std::env::var("REDLIMIT_MEET_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(drawn))
}

/// A child process: `CHILD_VAR` is `<part>|<redis url>|<seed>|<index>|<decisions>`.
#[test]
fn child() {
    let Some(spec) = child_process::spec(CHILD_VAR) else { return };
    let [part, url, seed, index, calls] = spec.split('|').collect::<Vec<_>>()[..] else { panic!("bad {CHILD_VAR}") };
    let (seed, index, calls) = (seed.parse().unwrap(), index.parse().unwrap(), calls.parse().unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let lines = runtime.block_on(async {
        let store = redis_store(url).await;
        barrier(url, part).await;
        process(part, &store, seed, index, calls, CHILD_TASKS).await
    });
    for line in lines {
        child_process::say(&line);
    }
}

async fn redis_store(url: &str) -> Store {
    // Patient: a call timed out would be settled by `on_error`, not decided.
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    Store::redis_with(url, patient).await.unwrap()
}

/// Waits until every process is connected, so they run side by side.
async fn barrier(url: &str, part: &str) {
    let mut con = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    let key = format!("barrier:{part}");
    let _: u64 = redis::cmd("INCR").arg(&key).query_async(&mut con).await.unwrap();
    for _ in 0..4000 {
        let ready: u64 = redis::cmd("GET").arg(&key).query_async(&mut con).await.unwrap();
        if ready as usize >= PROCESSES {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the other processes did not start");
}

/// A part's record lines on each store: `[("memory", lines), ("redis", lines)]`.
/// The memory store runs in this process on the wall clock; Redis from
/// `PROCESSES` children, each given a share of the decisions.
fn run(part: &str, seed: u64) -> [(&'static str, Vec<String>, usize); 2] {
    let n = decisions();
    let memory = redlimit_test_support::runtime::block_on(async {
        let store = Store::memory().with_clock(SystemClock);
        process(part, &store, seed, PROCESSES, n, TASKS).await
    });
    let server = RedisServer::start();
    let children: Vec<_> = (0..PROCESSES)
        .map(|i| TestChild::spawn("child", CHILD_VAR, &format!("{part}|{}|{seed}|{i}|{}", server.url(), n / PROCESSES)))
        .collect();
    let redis = children.into_iter().flat_map(TestChild::finish).collect();
    [("memory", memory, 1), ("redis", redis, PROCESSES)]
}

fn calls(lines: &[String]) -> Vec<Call> {
    lines.iter().map(|l| Call::from_line(l).unwrap_or_else(|| panic!("not a call: {l}"))).collect()
}

/// Prints what a model found and fails naming the seed unless it is nothing.
fn report(what: &str, seed: u64, calls: &[Call], excess: &[(String, Vec<Excess>)]) -> usize {
    let total: usize = excess.iter().map(|(_, e)| e.len()).sum();
    let by: Vec<String> = excess.iter().map(|(name, e)| format!("{name}: {}", e.len())).collect();
    let charges = calls.iter().filter(|c| c.charge).count();
    println!(
        "features_meet {what}: {} decisions and {charges} settlements' charges, {total} over-admissions ({}), seed {seed}",
        calls.len() - charges,
        by.join(", ")
    );
    for (name, e) in excess {
        for e in e.iter().take(3) {
            println!("  {name}: {:?}: {}", e.call, e.why);
        }
    }
    total
}

fn replay_seed(seed: u64) -> String {
    format!("replay with REDLIMIT_MEET_SEED={seed}")
}

#[test]
fn buckets_with_plan_changes_late_refunds_and_prefetch() {
    let seed = seed();
    let mut found = 0;
    for algo in ["token_bucket", "leaky_bucket", "gcra"] {
        let plans = plans(algo);
        let capacity = |c: &Call| plans[c.policy as usize].bucket.0;
        for (store, lines, processes) in run(algo, seed) {
            let all = calls(&lines);
            let of = |keys: &[u32]| all.iter().filter(|c| keys.contains(&c.key)).copied().collect::<Vec<_>>();
            // The prefetch guide's bound: min(rate × prefetch_ttl, P × (k − 1)) more; the
            // key's plans differ in capacity, and a permit may be spent under another's debt.
            let ttl_s = DEFAULT_PREFETCH_TTL.as_secs_f64();
            let slack = (RATE as f64 * ttl_s).min((processes as u64 * (K - 1)) as f64);
            let mut excess = vec![
                ("capacity changes".to_string(), meet::bucket_excess(&of(&[0, 1]), capacity, RATE as f64, 0.0)),
                ("rate changes".to_string(), meet::bucket_excess(&of(&[2]), capacity, FAST as f64, 0.0)),
                ("prefetch".to_string(), meet::bucket_excess(&of(&[3]), |_| 20, RATE as f64, slack)),
            ];
            if algo == "token_bucket" {
                let [own, mixed] = INTERVAL_KEYS;
                let own_interval = plans[5].interval.into_iter().collect::<Vec<_>>();
                let intervals: Vec<_> = MIXED.iter().filter_map(|&p| plans[p as usize].interval).collect();
                let fastest = MIXED.iter().map(|&p| plans[p as usize].bucket.1).fold(0.0, f64::max);
                // Denials show the bound was reached, not just kept.
                let enforced = of(&INTERVAL_KEYS).into_iter().filter(|c| !c.trial).collect::<Vec<_>>();
                let passed = enforced.iter().filter(|c| c.allowed).count();
                println!("features_meet {algo} on {store}: interval keys passed {passed} of {}", enforced.len());
                excess.extend([
                    (
                        "interval refill".to_string(),
                        meet::interval_bucket_excess(&of(&[own]), capacity, 0.0, &own_interval),
                    ),
                    (
                        "refills mixed".to_string(),
                        meet::interval_bucket_excess(&of(&[mixed]), capacity, fastest, &intervals),
                    ),
                ]);
            }
            found += report(&format!("{algo} on {store}"), seed, &all, &excess);
        }
    }
    assert_eq!(found, 0, "over-admitted; {}", replay_seed(seed));
}

#[test]
fn windows_with_plan_changes_and_late_refunds() {
    let seed = seed();
    let mut found = 0;
    for algo in ["fixed_window", "sliding_window", "sliding_log"] {
        let plans = plans(algo);
        let strategies = |c: &Call| &plans[c.policy as usize].strategies[..];
        for (store, lines, _) in run(algo, seed) {
            let all = calls(&lines);
            let excess = match algo {
                "fixed_window" => meet::fixed_window_excess(&all, strategies),
                "sliding_window" => meet::sliding_window_excess(&all, strategies, 10 * MS),
                _ => meet::sliding_log_excess(&all, strategies),
            };
            found += report(&format!("{algo} on {store}"), seed, &all, &[("plan changes".into(), excess)]);
        }
    }
    assert_eq!(found, 0, "over-admitted; {}", replay_seed(seed));
}

/// Dry-run trials beside enforced policies of the same limiter and keys,
/// whose windows and refills outlast the run: each key's enforced policy
/// admits exactly its limit of 10, whatever the trials beside it decided.
#[test]
fn dry_run_trials_beside_enforced_policies_spend_nothing_of_theirs() {
    let seed = seed();
    let mut wrong = Vec::new();
    for (store, lines, _) in run("dry_run", seed) {
        let all = calls(&lines);
        for (algo, name) in ["fixed_window", "token_bucket", "gcra"].iter().enumerate() {
            for key in 0..8 {
                let enforced = all.iter().filter(|c| c.key == key && c.policy == 2 * algo as u32);
                let (asked, passed) = enforced.fold((0, 0), |(a, p), c| (a + 1, p + u64::from(c.allowed)));
                if passed != asked.min(10) {
                    wrong.push(format!("{name} on {store}, key {key}: {passed} of {asked} passed, limit 10"));
                }
            }
        }
        println!("features_meet dry_run on {store}: {} decisions, seed {seed}", all.len());
    }
    println!("features_meet dry_run: {} keys off their limit: {wrong:#?}", wrong.len());
    assert!(wrong.is_empty(), "a trial spent an enforced count; {}", replay_seed(seed));
}

/// Holds of one concurrency run per store, computed once for both tests of it.
fn holds() -> &'static [(&'static str, Vec<Hold>)] {
    static HOLDS: std::sync::OnceLock<Vec<(&'static str, Vec<Hold>)>> = std::sync::OnceLock::new();
    HOLDS.get_or_init(|| {
        let parse = |l: &String| Hold::from_line(l).unwrap_or_else(|| panic!("not a hold: {l}"));
        run("concurrency", seed())
            .into_iter()
            .map(|(store, lines, _)| (store, lines.iter().map(parse).collect()))
            .collect()
    })
}

#[test]
fn concurrency_holders_cancelled_dropped_released_and_stopped_keep_the_limit() {
    let seed = seed();
    let mut over = Vec::new();
    for (store, holds) in holds() {
        let (most, at) = meet::most_live(holds);
        println!("features_meet concurrency on {store}: {} permits held, at most {most} live at once (limit {LIMIT}); seed {seed}", holds.len());
        if most > LIMIT as usize {
            over.push(format!("{store}: {most} live at {at} µs"));
        }
    }
    assert!(over.is_empty(), "more than {LIMIT} holders at once: {over:?}; {}", replay_seed(seed));
}

/// A holder stopped past its lease whose permit another took is told
/// (`is_held` turns false) once it runs again; counting the untold as still
/// running, no more than the limit ever ran at once.
#[test]
fn concurrency_holders_stopped_past_their_lease_are_told() {
    let seed = seed();
    let mut wrong = Vec::new();
    for (store, holds) in holds() {
        let (lost, told) = meet::lost_and_told(holds, LIMIT as usize);
        let (most, at) = meet::most_live_counting_untold(holds);
        println!(
            "features_meet concurrency on {store}: {lost} stopped holders lost their permit to another, {told} of them told; with the untold running on, at most {most} at once; seed {seed}"
        );
        if told < lost || most > LIMIT as usize {
            wrong.push(format!("{store}: {told} of {lost} told, {most} running at {at} µs"));
        }
    }
    assert!(wrong.is_empty(), "a holder that lost its lease was not told: {wrong:?}; {}", replay_seed(seed));
}

// The model itself, on calls whose answer is worked out by hand.

fn model_call(key: u32, policy: u32, at_us: u64) -> Call {
    Call { key, policy, cost: 1, allowed: true, at_us, refunded: false, prefetch: false, trial: false, charge: false }
}

#[test]
fn model_a_bucket_judged_under_a_smaller_capacity_keeps_what_the_larger_owes() {
    // 10 under capacity 10, then one under capacity 5 at once: owes 10.
    let mut calls: Vec<Call> = (0..10).map(|i| model_call(0, 1, i)).collect();
    calls.push(model_call(0, 0, 10));
    let capacity = |c: &Call| [5, 10][c.policy as usize];
    let excess = meet::bucket_excess(&calls, capacity, 1.0, 0.0);
    assert_eq!(excess.len(), 1, "{excess:?}");
    // A second later one is paid off: 9 + 1 fits 10, not 5.
    calls[10].at_us = 1_000_010;
    assert_eq!(meet::bucket_excess(&calls, capacity, 1.0, 0.0).len(), 1);
    calls[10].policy = 1;
    assert!(meet::bucket_excess(&calls, capacity, 1.0, 0.0).is_empty());
    // A refunded call never happened.
    calls[0].refunded = true;
    calls.push(model_call(0, 1, 1_000_011));
    assert!(meet::bucket_excess(&calls, capacity, 1.0, 0.0).is_empty());
}

#[test]
fn model_a_charge_is_owed_past_the_limit_and_never_judged() {
    // Capacity 3 at one a second: three at once, then a settlement's charge of 2.
    let mut calls: Vec<Call> = (0..3).map(|i| model_call(0, 0, i)).collect();
    calls.push(Call { cost: 2, charge: true, ..model_call(0, 0, 3) });
    assert!(meet::bucket_excess(&calls, |_| 3, 1.0, 0.0).is_empty(), "a charge is never an excess");
    // Owed 5: two seconds pay 2, and a third call finds 3 + 1 > 3; a third second makes room.
    calls.push(model_call(0, 0, 2_000_003));
    assert_eq!(meet::bucket_excess(&calls, |_| 3, 1.0, 0.0).len(), 1);
    calls[4].at_us = 3_000_003;
    assert!(meet::bucket_excess(&calls, |_| 3, 1.0, 0.0).is_empty());
    // A window counts it too: limit 3 per second, full after the charge.
    let strategies = [(3, 1_000_000)];
    let mut calls: Vec<Call> = vec![model_call(0, 0, 0), Call { cost: 3, charge: true, ..model_call(0, 0, 1) }];
    calls.push(model_call(0, 0, 2));
    assert_eq!(meet::fixed_window_excess(&calls, |_| &strategies[..]).len(), 1);
    calls[2].at_us = 1_000_000;
    assert!(meet::fixed_window_excess(&calls, |_| &strategies[..]).is_empty(), "the next window");
}

#[test]
fn model_an_interval_bucket_admits_its_capacity_and_a_periods_count_per_period_end() {
    // Capacity 3, 2 tokens per 100 µs: three at 50 fill it, the end at 100 pays 2.
    let mut calls: Vec<Call> = [50, 50, 50, 99, 100, 100, 199, 200].iter().map(|&at| model_call(0, 0, at)).collect();
    let excess = |calls: &[Call], rate| meet::interval_bucket_excess(calls, |_| 3, rate, &[(2, 100)]);
    let at = |e: Vec<Excess>| e.iter().map(|e| e.call.at_us).collect::<Vec<_>>();
    // 99 is before the end, whose 2 the two at 100 take; 199 is before the next.
    assert_eq!(at(excess(&calls, 0.0)), [99, 199]);
    // A refunded call never happened: 99's room is its.
    calls[0].refunded = true;
    assert_eq!(at(excess(&calls, 0.0)), [199]);
    // Paid at 10 000 a second besides (a permit per 100 µs), 199 finds one more.
    assert!(excess(&calls, 10_000.0).is_empty());
    assert_eq!(meet::period_ends(99, 100, 100), 1);
    assert_eq!(meet::period_ends(100, 199, 100), 0);
    assert_eq!(meet::period_ends(100, 99, 100), 0);
}

#[test]
fn model_a_fixed_window_starts_at_the_first_call_after_the_last_ended() {
    let strategies: [Strategy; 1] = [(2, 100)];
    let of = |_: &Call| &strategies[..];
    let calls = [
        model_call(0, 0, 50),
        model_call(0, 0, 149),
        model_call(0, 0, 150),
        model_call(0, 0, 151),
        model_call(0, 0, 249),
    ];
    // Windows [50, 150) and [150, 250): the fifth is the third of the second.
    let excess = meet::fixed_window_excess(&calls, of);
    assert_eq!(excess.iter().map(|e| e.call.at_us).collect::<Vec<_>>(), [249]);
}

#[test]
fn model_sliding_rules_count_the_calls_of_their_span() {
    let strategies: [Strategy; 1] = [(2, 100)];
    let of = |_: &Call| &strategies[..];
    let calls = [model_call(0, 0, 0), model_call(0, 0, 99), model_call(0, 0, 100), model_call(0, 0, 150)];
    // The log: (50, 150] holds 99 and 100.
    assert_eq!(meet::sliding_log_excess(&calls, of).len(), 1);
    // Sub-windows of 50: at 150 the span is [100, 200), holding 100 only.
    assert!(meet::sliding_window_excess(&calls, of, 50).is_empty());
    assert_eq!(meet::sliding_window_excess(&calls[..3], of, 100).len(), 0);
}

#[test]
fn model_holders_are_counted_until_released_or_stopped() {
    let hold = |from_us, until_us, stopped_us| Hold { from_us, until_us, stopped_us, told_lost: false, woke_us: 400 };
    let holds = [hold(0, 100, None), hold(10, 500, Some(20)), hold(30, 40, None), hold(100, 200, None)];
    assert_eq!(meet::most_live(&holds), (2, 10));
    assert_eq!(meet::lost_and_told(&holds, 1), (1, 0));
    // Not told, the stopped one runs on from 400 beside none: at most 2 still.
    assert_eq!(meet::most_live_counting_untold(&holds), (2, 10));
    assert_eq!(Hold::from_line(&holds[1].to_line()), Some(holds[1]));
    let c = model_call(3, 2, 7);
    assert_eq!(Call::from_line(&c.to_line()), Some(c));
}
