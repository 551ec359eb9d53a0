#![cfg(feature = "redis")]
//! Reservations settled from several processes at once on one key: 4
//! processes × 4 tasks, each task reserving and settling one reservation
//! after another (the actual cost drawn on either side of the estimate, so
//! about half are overages), on this test's own Redis. The processes are
//! this test binary again, running only `child_process`.
//!
//! Per policy, afterwards the store's total charge, read back from the key,
//! equals the sum of the actual costs of the admitted reservations
//! exactly, and that sum is within the bound the guide states: the limit
//! plus what the reservations in flight may settle above their estimates
//! (one per task here). Buckets and GCRA run on a clock every process holds
//! still (so nothing is paid off and their debt is the total charge, read
//! from `reset_after`); fixed windows on Redis's own clock (their counts
//! read from the key), one window long enough for the whole run. Every run
//! is a count of calls, never a duration.

use redlimit::{Limiter, ManualClock, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::child_process::{self, TestChild};
use redlimit_test_support::redis_server::RedisServer;
use std::time::Duration;

const CHILD_VAR: &str = "REDLIMIT_SETTLE_CHILD";
const PROCESSES: usize = 4;
const TASKS: usize = 4;
const ROUNDS: usize = 60;
/// Estimates are 1 to this; an actual cost 0 to twice the estimate.
const MOST_ESTIMATE: u64 = 10;
/// The most a settlement can charge above its estimate.
const MOST_OVERAGE: u64 = MOST_ESTIMATE;
const LIMIT: u64 = 1000;
/// A clock held still: 2026-01-01, in µs.
const STILL_US: u64 = 1_767_225_600_000_000;

/// (name, policy, on Redis's clock).
fn cases() -> Vec<(&'static str, Policy, bool)> {
    vec![
        ("token_bucket", Policy::token_bucket(LIMIT, "1/1h").unwrap(), false),
        ("leaky_bucket", Policy::leaky_bucket(LIMIT, "1/1h").unwrap(), false),
        ("gcra", Policy::gcra("1/1h", LIMIT - 1).unwrap(), false),
        ("fixed_window_counter", Policy::fixed_window(&format!("{LIMIT}/1h")).unwrap(), true),
        ("fixed_window", Policy::fixed_window(&format!("{LIMIT}/1h,100000/2h")).unwrap(), true),
    ]
}

async fn store(url: &str, server_clock: bool) -> Store {
    // Patient with Redis: on a loaded machine the default timeout fails calls, which is not what this measures.
    let options = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    let store = Store::redis_with(url, options).await.unwrap();
    match server_clock {
        true => store,
        false => store.with_clock(ManualClock::starting_at(STILL_US)),
    }
}

/// A child process: `CHILD_VAR` is `<redis url>|<case index>|<seed>`. Says
/// `<sum of actual costs admitted> <reservations admitted> <overages>`.
#[test]
fn child_process() {
    let Some(spec) = child_process::spec(CHILD_VAR) else { return };
    let [url, case, seed] = spec.split('|').collect::<Vec<_>>()[..] else { panic!("bad {CHILD_VAR}") };
    let (name, policy, server_clock) = cases().swap_remove(case.parse().unwrap());
    let seed: u64 = seed.parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let [sum, admitted, over] = runtime.block_on(async {
        // A store that cannot answer denies: nothing is let through untaken.
        let limiter = Limiter::new(name, policy, &store(url, server_clock).await).with_on_error(OnError::Deny);
        barrier(url, name).await;
        let tasks: Vec<_> = (0..TASKS as u64)
            .map(|task| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let mut totals = [0u64; 3];
                    // A small generator of its own: each task's draws differ, every run alike.
                    let mut x = seed * 7919 + task * 104_729 + 1;
                    let mut draw = |below: u64| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x % below
                    };
                    for _ in 0..ROUNDS {
                        let estimate = 1 + draw(MOST_ESTIMATE);
                        // Slightly below the estimate on average, so the key nears its limit slowly.
                        let actual = draw(2 * estimate);
                        let Ok(reservation) = limiter.reserve("hot", estimate).await else { continue };
                        assert!(reservation.decision().allowed, "nothing let through");
                        reservation.settle(actual).await.expect("settled");
                        totals[0] += actual;
                        totals[1] += 1;
                        totals[2] += u64::from(actual > estimate);
                    }
                    totals
                })
            })
            .collect();
        let mut sums = [0u64; 3];
        for task in tasks {
            for (sum, n) in sums.iter_mut().zip(task.await.unwrap()) {
                *sum += n;
            }
        }
        sums
    });
    child_process::say(&format!("{sum} {admitted} {over}"));
}

/// Waits until every process is connected, so they run side by side.
async fn barrier(url: &str, name: &str) {
    let mut con = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    let key = format!("barrier:{name}");
    let _: u64 = redis::cmd("INCR").arg(&key).query_async(&mut con).await.unwrap();
    // However slowly a busy machine starts them: a minute at most.
    for _ in 0..12_000 {
        let ready: u64 = redis::cmd("GET").arg(&key).query_async(&mut con).await.unwrap();
        if ready as usize >= PROCESSES {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the other processes did not start");
}

/// The store's total charge on the key, read back: a bucket's or GCRA's
/// debt, on a clock held still (`reset_after`, an hour per permit), or a
/// fixed window's count, from the key (the counter's value below its unit
/// of window, or the hash's first count).
async fn total_charge(url: &str, name: &str, policy: &Policy, server_clock: bool) -> u64 {
    let limiter = Limiter::new(name, policy.clone(), &store(url, server_clock).await);
    if !server_clock {
        let reset = limiter.peek("hot", 0).await.unwrap().reset_after;
        assert_eq!(reset.as_micros() % 3_600_000_000, 0, "{name}: whole permits");
        return (reset.as_micros() / 3_600_000_000) as u64;
    }
    let mut con = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    let key = format!("redlimit:fixed_window/v3:{}:{name}:hot", name.len());
    match policy.strategies().len() {
        1 => {
            let held: u64 = redis::cmd("GET").arg(&key).query_async(&mut con).await.unwrap();
            held % (1 << 21)
        }
        _ => redis::cmd("HGET").arg(&key).arg("c1").query_async(&mut con).await.unwrap(),
    }
}

#[test]
fn settlements_from_four_processes_charge_exactly_the_actual_costs_within_the_stated_bound() {
    let server = RedisServer::start();
    for (index, (name, policy, server_clock)) in cases().into_iter().enumerate() {
        let children: Vec<_> = (0..PROCESSES)
            .map(|seed| TestChild::spawn("child_process", CHILD_VAR, &format!("{}|{index}|{seed}", server.url())))
            .collect();
        let (mut sum, mut admitted, mut over) = (0, 0, 0);
        for child in children {
            let said = child.finish();
            let n: Vec<u64> = said[0].split(' ').map(|n| n.parse().unwrap()).collect();
            (sum, admitted, over) = (sum + n[0], admitted + n[1], over + n[2]);
        }
        let charged =
            redlimit_test_support::runtime::block_on(total_charge(&server.url(), name, &policy, server_clock));
        println!("{name}: {admitted} reservations admitted ({over} over their estimate), {sum} charged");
        assert_eq!(charged, sum, "{name}: the store charged the actual costs, exactly");
        // One reservation in flight per task at most: each may settle up to MOST_OVERAGE above.
        let bound = LIMIT + (PROCESSES * TASKS) as u64 * MOST_OVERAGE;
        assert!(sum <= bound, "{name}: {sum} admitted, above the limit and what those in flight owe ({bound})");
        assert!(admitted >= 100 && over >= 30, "{name}: too few reservations admitted to say anything");
    }
}
