//! The calls of `tests/features_meet.rs`'s rate parts: each part's plans,
//! and the worker tasks that draw every call (key, plan, cost, a refund soon
//! or late, a reservation settled below its estimate soon or late, a dry-run
//! trial of the plan, prefetch) and record it as a [`Call`].

use crate::meet::{Call, Draws, Hold, Interval, Strategy};
use crate::meet_holders;
use redlimit::{Decision, Error, Limiter, OnError, Policy, Priority, Store};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Prefetch's `k` on the prefetching key.
pub const K: u64 = 8;

fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

fn at_us(decision: &Decision) -> u64 {
    decision.decided_at.duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

/// `REDLIMIT_MEET_WITHOUT=refunds` or `=plans` leaves one feature out, to
/// tell which one an over-admission comes from.
pub fn without(feature: &str) -> bool {
    std::env::var("REDLIMIT_MEET_WITHOUT").is_ok_and(|w| w.split(',').any(|w| w == feature))
}

/// The refund of the call `of` answered.
async fn refund(limiter: &Limiter, key: &str, n: u64, of: &Decision) -> Result<Decision, Error> {
    limiter.refund(key, n, of).await
}

/// One plan of a run: the policy, and the numbers its model reads.
pub struct Plan {
    /// What calls name in `with_policy`.
    pub policy: Policy,
    /// Capacity (GCRA: burst + 1) and rate per second, for buckets.
    pub bucket: (u64, f64),
    /// Limit and window of each strategy, for windows.
    pub strategies: Vec<Strategy>,
    /// Tokens per period and period, for a token bucket refilled by interval.
    pub interval: Option<Interval>,
    /// The class calls decide as (`Limiter::with_priority`); the numbers
    /// above are that class's share of the policy's.
    pub class: Priority,
}

pub const MS: u64 = 1_000;
/// Calls are made in the first `BUSY_US` of each `CYCLE_US`.
const CYCLE_US: u64 = 450 * MS;
const BUSY_US: u64 = 200 * MS;

/// A bucket's rate per second: its calls are offered several times faster,
/// and it refills within the idle part of a cycle. Key 2's plans reach `FAST`.
pub const RATE: u64 = 100;
pub const FAST: u64 = 200;

/// The token bucket part's interval refills: plan 5's, the one of key 4,
/// paces 100 a second as `RATE` does, so plan 0 switches its refill alone;
/// plan 6's ends fall elsewhere. Neither period divides `CYCLE_US`, so the
/// busy parts start at every phase of them.
pub const INTERVALS: [Interval; 2] = [(10, 100 * MS), (12, 150 * MS)];
/// The token bucket part's keys: 4 keeps plan 5, 5 mixes refills (plans `MIXED`).
pub const INTERVAL_KEYS: [u32; 2] = [4, 5];
pub const MIXED: [u32; 5] = [0, 3, 4, 5, 6];

/// The plans of each part, by index. Buckets: 0 to 2 change capacity only
/// (keys 0 and 1, and the prefetching key 3), 3 and 4 change the rate too (key 2);
/// the token bucket's 5 and 6 refill by interval (keys 4 and 5, `INTERVALS`).
/// Windows: limits ascend together, so a tie is replayed in its easiest order.
pub fn plans(part: &str) -> Vec<Plan> {
    let bucket = |capacity: u64, per_s: u64| {
        let rate = format!("{per_s}/1s");
        let policy = match part {
            "token_bucket" => Policy::token_bucket(capacity, &rate),
            "leaky_bucket" => Policy::leaky_bucket(capacity, &rate),
            _ => Policy::gcra(&rate, capacity - 1),
        };
        let bucket = (capacity, per_s as f64);
        Plan { policy: policy.unwrap(), bucket, strategies: Vec::new(), interval: None, class: Priority::Normal }
    };
    let interval = |capacity: u64, (n, period_us): Interval| {
        let policy = Policy::token_bucket_interval(capacity, &format!("{n}/{}ms", period_us / MS)).unwrap();
        let per_s = n as f64 * 1e6 / period_us as f64;
        let interval = Some((n, period_us));
        Plan { policy, bucket: (capacity, per_s), strategies: Vec::new(), interval, class: Priority::Normal }
    };
    let windows = |short: (u64, u64), long: u64| {
        let text = format!("{}/{}ms,{long}/1s", short.0, short.1);
        let policy = match part {
            "fixed_window" => Policy::fixed_window(&text),
            "sliding_window" => Policy::sliding_window(&text, "10ms"),
            _ => Policy::sliding_log(&text),
        };
        Plan {
            policy: policy.unwrap(),
            bucket: (0, 0.0),
            strategies: vec![(short.0, short.1 * MS), (long, 1_000 * MS)],
            interval: None,
            class: Priority::Normal,
        }
    };
    // The largest plan keeping half from low calls and a quarter from normal
    // ones: each class's plan states its own share, and critical calls the whole.
    let classes = |largest: Plan| {
        let policy = largest.policy.clone().with_headroom(50, 25).unwrap();
        Priority::ALL.map(|class| {
            let share = |limit: u64| limit * (100 - policy.headroom().percent(class) as u64) / 100;
            let strategies = largest.strategies.iter().map(|&(limit, window_us)| (share(limit), window_us)).collect();
            Plan { policy: policy.clone(), bucket: (0, 0.0), strategies, interval: None, class }
        })
    };
    match part {
        "token_bucket" | "leaky_bucket" | "gcra" => {
            let mut plans =
                vec![bucket(5, RATE), bucket(10, RATE), bucket(20, RATE), bucket(8, RATE / 2), bucket(16, FAST)];
            if part == "token_bucket" {
                plans.extend([interval(10, INTERVALS[0]), interval(24, INTERVALS[1])]);
            }
            plans
        }
        // The short windows bind, so a refund that arrives after its window
        // ended finds another. Plans change limits, not lengths: a window
        // written under a shorter length ends by it, which README states and
        // tests/limiter_fixed_window_plan_change.rs pins apart.
        // Plans 3 to 5: the classes of plan 2 with headroom.
        "fixed_window" => {
            let mut plans = vec![windows((10, 100), 100), windows((15, 100), 120), windows((20, 100), 220)];
            plans.extend(classes(windows((20, 100), 220)));
            plans
        }
        "sliding_window" | "sliding_log" => {
            let mut plans = vec![windows((10, 100), 30), windows((15, 100), 40), windows((20, 100), 50)];
            plans.extend(classes(windows((20, 100), 50)));
            plans
        }
        "dry_run" => {
            let enforced = [Policy::fixed_window("10/1h"), Policy::token_bucket(10, "1/1h"), Policy::gcra("1/1h", 9)];
            let trials = [Policy::fixed_window("5/1h"), Policy::token_bucket(5, "1/1h"), Policy::gcra("1/1h", 4)];
            let plan = |policy: Policy| Plan {
                policy,
                bucket: (10, 0.0),
                strategies: Vec::new(),
                interval: None,
                class: Priority::Normal,
            };
            enforced
                .into_iter()
                .zip(trials)
                .flat_map(|(e, t)| [plan(e.unwrap()), plan(t.unwrap().with_dry_run(true))])
                .collect()
        }
        _ => panic!("no part {part}"),
    }
}

/// One worker task's calls: `calls` decisions drawn from `rng`.
async fn worker(part: &str, store: Store, mut rng: Draws, calls: usize) -> Vec<Call> {
    let plans = plans(part);
    let bucket = plans[0].bucket.0 > 0 && part != "dry_run";
    let limiter = Limiter::new(format!("meet-{part}"), plans[0].policy.clone(), &store).with_on_error(OnError::Deny);
    let prefetching = bucket.then(|| limiter.clone().with_prefetch(K).unwrap());
    let mut records = Vec::with_capacity(calls);
    let mut refunds = Vec::new();
    let mut settlements = Vec::new();
    for _ in 0..calls {
        let (key, policy) = match part {
            _ if bucket => match rng.range(0, if part == "token_bucket" { 6 } else { 4u32 }) {
                2 => (2, rng.range(0, 5)),
                4 => (4, 5),
                5 => (5, MIXED[rng.range(0, MIXED.len() as u64) as usize]),
                key => (key, rng.range(0, 3)),
            },
            // An enforced policy or its trial, of one of three algorithms.
            "dry_run" => (rng.range(0, 8u32), rng.range(0, 6)),
            // Plans 3 to 5 are plan 2's classes.
            _ => (rng.range(0, 3u32), rng.range(0, 6)),
        };
        // Without plan changes, each key keeps one plan.
        let policy = match () {
            _ if part == "dry_run" || !without("plans") => policy,
            // An interval key keeps an interval plan.
            _ if INTERVAL_KEYS.contains(&key) => 5,
            _ => 2,
        };
        let cost = if part == "dry_run" || rng.chance(0.7) { 1 } else { rng.range(2, 5) };
        let prefetch = bucket && key == 3;
        let plan = &plans[policy as usize];
        // A tenth of the calls are dry-run trials of the plan, beside it on the same key.
        let trial = plan.policy.is_dry_run() || (part != "dry_run" && rng.chance(0.1));
        let tried = plan.policy.clone().with_dry_run(true);
        let policy_of_call = if trial { &tried } else { &plan.policy };
        let by = match &prefetching {
            Some(prefetching) if prefetch => prefetching.with_policy(policy_of_call),
            _ => limiter.with_policy(policy_of_call),
        }
        .with_priority(plan.class);
        let name = format!("k{key}");
        let refundable = !part.starts_with("sliding") && part != "dry_run" && !trial;
        // Some calls of several permits reserve them, and settle soon or
        // late: below the estimate the model counts the actual cost, which a
        // settlement gives back to at most, as a refund does; above it, the
        // estimate, and the overage as a charge when the settlement is made.
        let reserving = refundable && cost > 1 && rng.chance(0.15) && !without("refunds");
        if reserving {
            let (decision, reservation) = match by.reserve(&name, cost).await {
                Ok(reservation) => (reservation.decision().clone(), Some(reservation)),
                Err(denied) => (denied.decision().clone(), None),
            };
            let (at_us, allowed) = (at_us(&decision), decision.allowed);
            let actual = if rng.chance(0.3) { rng.range(cost + 1, 2 * cost + 1) } else { rng.range(0, cost) };
            let late = rng.chance(0.5) && (at_us / CYCLE_US) & 1 == 0;
            let delay = if late { rng.range(400, 600) } else { rng.range(0, 20) };
            if let Some(reservation) = reservation {
                settlements.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    let settled = reservation.settle(actual).await.ok()?;
                    let overage = actual.checked_sub(cost).filter(|&o| o > 0)?;
                    let at_us = self::at_us(&settled);
                    Some(Call {
                        key,
                        policy,
                        cost: overage,
                        allowed: true,
                        at_us,
                        refunded: false,
                        prefetch,
                        trial,
                        charge: true,
                    })
                }));
            }
            let (cost, refunded) =
                if allowed && actual > 0 && actual < cost { (actual, false) } else { (cost, allowed && actual == 0) };
            records.push(Call { key, policy, cost, allowed, at_us, refunded, prefetch, trial, charge: false });
        } else {
            let decision = by.check(&name, cost).await.unwrap();
            let (at_us, allowed) = (at_us(&decision), decision.allowed);
            let refunded = decision.allowed && refundable && rng.chance(0.2) && !without("refunds");
            if refunded {
                // Half soon, inside the window; half in the next cycle's busy part,
                // after the window ended or the bucket refilled. Only calls of every
                // other cycle are refunded late: in the cycles between, the late
                // refunds arrive and no pending one gives the model room.
                let late = rng.chance(0.5) && (at_us / CYCLE_US) & 1 == 0;
                let delay = if late { rng.range(400, 600) } else { rng.range(0, 20) };
                refunds.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    let _ = refund(&by, &name, cost, &decision).await;
                }));
            }
            records.push(Call { key, policy, cost, allowed, at_us, refunded, prefetch, trial, charge: false });
        }
        tokio::time::sleep(Duration::from_micros(rng.range(100, 1_500))).await;
        // Every process idles together for part of each cycle of the wall
        // clock, long enough for every bucket to refill and window to end:
        // a late refund then finds a key that forgot the call it refunds.
        let phase_us = wall_us() % CYCLE_US;
        if phase_us >= BUSY_US && part != "dry_run" {
            tokio::time::sleep(Duration::from_micros(CYCLE_US - phase_us)).await;
        }
    }
    for refund in refunds {
        refund.await.unwrap();
    }
    for settlement in settlements {
        records.extend(settlement.await.unwrap());
    }
    records
}

/// A process's share of a part: `tasks` workers on `store`.
pub async fn process(part: &str, store: &Store, seed: u64, index: usize, calls: usize, tasks: usize) -> Vec<String> {
    if part == "concurrency" {
        let seed = seed ^ index as u64;
        return meet_holders::holders(store, seed, calls, tasks).await.iter().map(Hold::to_line).collect();
    }
    let workers: Vec<_> = (0..tasks)
        .map(|task| {
            let rng = Draws::new(seed.wrapping_add((index * tasks + task) as u64));
            tokio::spawn(worker_owned(part.to_string(), store.clone(), rng, calls / tasks))
        })
        .collect();
    let mut lines = Vec::new();
    for worker in workers {
        lines.extend(worker.await.unwrap().iter().map(Call::to_line));
    }
    lines
}

async fn worker_owned(part: String, store: Store, rng: Draws, calls: usize) -> Vec<Call> {
    worker(&part, store, rng, calls).await
}
