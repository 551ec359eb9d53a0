//! Calendar windows (`1000/1d@Europe/Paris`) on both stores, on the manual
//! clock: the days the clocks change in three zones of both hemispheres,
//! the end of February in a leap year and not, December to January, and
//! ISO weeks. Each timeline is replayed on both stores, which must agree
//! on every field, and judged against the calendar itself: no window ever
//! admits past its limit, and a running window resets at its end.

use futures_util::future::join_all;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Calendar, CalendarUnit, Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

const HOUR: u64 = 3_600_000_000;

fn us(text: &str) -> u64 {
    let (date, time) = text.split_once('T').unwrap();
    let [y, mo, d]: [u64; 3] = date.split('-').map(|v| v.parse().unwrap()).collect::<Vec<_>>().try_into().unwrap();
    let [h, mi]: [u64; 2] =
        time.trim_end_matches('Z').split(':').map(|v| v.parse().unwrap()).collect::<Vec<_>>().try_into().unwrap();
    // Days from the epoch (Howard Hinnant's days_from_civil).
    let (y, mo) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + h * 3600 + mi * 60) * 1_000_000
}

/// Each edge: a policy and a time a few hours before it (UTC).
fn edges() -> Vec<(&'static str, &'static str)> {
    vec![
        // Spring forward and fall back, two zones of the north, one of the south.
        ("3/1d@Europe/Paris", "2026-03-28T20:00Z"),
        ("3/1d@Europe/Paris", "2026-10-24T20:00Z"),
        ("3/1d@America/New_York", "2026-03-08T02:00Z"),
        ("3/1d@America/New_York", "2026-10-31T23:00Z"),
        ("2/1d@Australia/Sydney,6/1mo@Australia/Sydney", "2026-04-04T10:00Z"),
        ("2/1d@Australia/Sydney,6/1mo@Australia/Sydney", "2026-10-03T10:00Z"),
        // The end of February, in a leap year and not; December to January.
        ("4/1mo@UTC,2/1h", "2028-02-28T20:00Z"),
        ("4/1mo@UTC,2/1h", "2027-02-27T20:00Z"),
        ("4/1mo@America/New_York", "2026-02-28T20:00Z"),
        ("3/1y@Europe/Paris,2/1d@Europe/Paris", "2026-12-31T18:00Z"),
        ("3/1w@Europe/Paris", "2026-12-27T18:00Z"),
    ]
}

#[tokio::test]
async fn both_stores_agree_across_clock_changes_month_ends_and_the_new_year() {
    let both = BothStores::start().await;
    let mut decisions = 0;
    for (index, (text, from)) in edges().into_iter().enumerate() {
        let policy = Policy::fixed_window(text).unwrap();
        for seed in 0..3u64 {
            let name = format!("calendar-{index}-{seed}");
            let on_memory = Limiter::new(name.as_str(), policy.clone(), &both.memory).with_deny_cache(false);
            let on_redis = Limiter::new(name.as_str(), policy.clone(), &both.redis).with_deny_cache(false);
            let mut rng = SmallRng::seed_from_u64(seed * 100 + index as u64);
            both.clock.set_us(us(from));
            // Per strategy and calendar window: the permits admitted in it.
            let mut admitted: HashMap<(usize, u64), u64> = HashMap::new();
            let mut admitted_refs = Vec::new();
            for step in 0..120 {
                both.clock.advance(Duration::from_micros(match rng.random_range(0..4) {
                    0 => rng.random_range(0..HOUR / 4),
                    1 => rng.random_range(0..2 * HOUR),
                    _ => rng.random_range(0..HOUR / 20),
                }));
                let cost = if rng.random_range(0..6) == 0 { 2 } else { 1 };
                let (memory, redis) = match rng.random_range(0..10) {
                    0 => (on_memory.peek("k", cost).await.unwrap(), on_redis.peek("k", cost).await.unwrap()),
                    1 if !admitted_refs.is_empty() => {
                        let of = &admitted_refs[rng.random_range(0..admitted_refs.len())];
                        (on_memory.refund("k", 1, of).await.unwrap(), on_redis.refund("k", 1, of).await.unwrap())
                    }
                    _ => (on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap()),
                };
                assert_eq!(memory, redis, "{text}, seed {seed}, step {step}");
                decisions += 1;
                let at = memory.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
                if memory.allowed && cost > 0 && memory.decided_at == redis.decided_at {
                    admitted_refs.push(memory.clone());
                }
                for (i, s) in policy.strategies().iter().enumerate() {
                    let Some(calendar) = s.calendar else { continue };
                    let (start, end) = calendar.window_at(at).unwrap();
                    let quota = if policy.strategies().len() > 1 { Some(&memory.quotas[i]) } else { None };
                    let used = s.limit - quota.map_or(memory.remaining, |q| q.remaining);
                    // No window runs past its calendar end, nor admits past its limit.
                    let reset = quota.map_or(memory.reset_after, |q| q.reset_after);
                    if used > 0 {
                        assert_eq!(reset, Duration::from_micros(end - at), "{text}: resets at the calendar end");
                    }
                    let seen = admitted.entry((i, start)).or_default();
                    *seen = (*seen).max(used);
                    assert!(*seen <= s.limit, "{text}: over the limit in a window");
                }
            }
        }
    }
    assert!(decisions > 3000, "{decisions}");
}

#[tokio::test]
async fn reset_and_retry_count_to_the_boundary_of_a_23_and_a_25_hour_day() {
    let both = BothStores::start().await;
    for (zone, day_start, hours) in [
        ("Europe/Paris", "2026-03-28T23:00Z", 23),
        ("Europe/Paris", "2026-10-24T22:00Z", 25),
        ("America/New_York", "2026-03-08T05:00Z", 23),
        ("America/New_York", "2026-11-01T04:00Z", 25),
    ] {
        for store in [&both.memory, &both.redis] {
            let policy = Policy::fixed_window(&format!("2/1d@{zone}")).unwrap();
            let limiter = Limiter::new(format!("day-{zone}-{day_start}"), policy, store).with_deny_cache(false);
            both.clock.set_us(us(day_start) + HOUR / 2);
            let first = limiter.check("k", 1).await.unwrap();
            let left = Duration::from_micros(hours * HOUR - HOUR / 2);
            assert_eq!((first.remaining, first.reset_after), (1, left), "{zone} {day_start} on {}", store.kind());
            limiter.check("k", 1).await.unwrap();
            both.clock.advance(Duration::from_micros((hours - 2) * HOUR));
            let denied = limiter.check("k", 1).await.unwrap();
            assert!(!denied.allowed);
            assert_eq!(denied.retry_after, Some(Duration::from_micros(3 * HOUR / 2)), "{zone} on {}", store.kind());
            both.clock.advance(Duration::from_micros(3 * HOUR / 2));
            let next_day = limiter.check("k", 1).await.unwrap();
            assert_eq!((next_day.allowed, next_day.remaining), (true, 1), "a new day at local midnight");
        }
    }
}

/// 400 calls from 20 tasks, the clock crossing from March to April in
/// Paris once half of them were made: each month admits exactly its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_run_over_a_month_boundary_admits_exactly_the_limit_in_each_month() {
    let both = BothStores::start().await;
    let month = Calendar::new(CalendarUnit::Month, "Europe/Paris").unwrap();
    for store in [&both.memory, &both.redis] {
        let limiter = Limiter::new(
            format!("month-{}", store.kind()),
            Policy::fixed_window("50/1mo@Europe/Paris").unwrap(),
            store,
        )
        .with_deny_cache(false);
        both.clock.set_us(us("2026-03-31T21:00Z"));
        let made = Arc::new(AtomicU64::new(0));
        let tasks = (0..20).map(|_| {
            let (limiter, made, clock) = (limiter.clone(), made.clone(), both.clock.clone());
            tokio::spawn(async move {
                let mut admitted = Vec::new();
                for _ in 0..20 {
                    if made.fetch_add(1, Ordering::SeqCst) == 200 {
                        clock.set_us(us("2026-03-31T22:30Z")); // 00:30 on the first of April in Paris
                    }
                    let d = limiter.check("k", 1).await.unwrap();
                    if d.allowed {
                        admitted.push(d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64);
                    }
                }
                admitted
            })
        });
        let mut per_month: HashMap<u64, u64> = HashMap::new();
        for admitted in join_all(tasks).await {
            for at in admitted.unwrap() {
                *per_month.entry(month.window_at(at).unwrap().0).or_default() += 1;
            }
        }
        let march = month.window_at(us("2026-03-15T00:00Z")).unwrap().0;
        let april = month.window_at(us("2026-04-15T00:00Z")).unwrap().0;
        assert_eq!(per_month, HashMap::from([(march, 50), (april, 50)]), "on {}", store.kind());
    }
}

/// A calendar day begins at midnight, a rolling one at a key's first call;
/// a limiter name whose policy switches between the two keeps one state,
/// each judging the other's window by its own rule, alike on both stores.
#[tokio::test]
async fn a_calendar_day_and_a_rolling_day_of_one_name_judge_one_state_alike() {
    let both = BothStores::start().await;
    let decide = |policy: &str, now: &str| {
        let (policy, now) = (Policy::fixed_window(policy).unwrap(), us(now));
        let (memory, redis) = (both.memory.clone(), both.redis.clone());
        let clock = both.clock.clone();
        async move {
            clock.set_us(now);
            let on_memory = Limiter::new("switch", policy.clone(), &memory).with_deny_cache(false);
            let on_redis = Limiter::new("switch", policy, &redis).with_deny_cache(false);
            let decided = (on_memory.check("k", 1).await.unwrap(), on_redis.check("k", 1).await.unwrap());
            assert_eq!(decided.0, decided.1, "at {now}");
            decided.0
        }
    };
    assert!(decide("2/1d@UTC", "2026-06-10T21:30Z").await.allowed);
    let midnight = decide("2/1d@UTC", "2026-06-11T00:00Z").await;
    assert_eq!((midnight.remaining, midnight.reset_after), (1, Duration::from_micros(24 * HOUR)), "a new day");
    // The rolling day judges the calendar's window from its start, midnight.
    let rolling = decide("2/1d", "2026-06-11T12:00Z").await;
    assert_eq!((rolling.remaining, rolling.reset_after), (0, Duration::from_micros(12 * HOUR)));
    assert!(!decide("2/1d", "2026-06-11T23:00Z").await.allowed);
    // A rolling day begun at 01:00 is inside the calendar's next day: it counts there until midnight.
    assert!(decide("2/1d", "2026-06-12T01:00Z").await.allowed);
    let calendar = decide("2/1d@UTC", "2026-06-12T02:00Z").await;
    assert_eq!((calendar.remaining, calendar.reset_after), (0, Duration::from_micros(22 * HOUR)));
    assert!(!decide("2/1d@UTC", "2026-06-12T23:59Z").await.allowed);
    assert!(decide("2/1d@UTC", "2026-06-13T00:00Z").await.allowed, "a calendar day begins at its midnight");
}

/// A store on Redis's clock decides a calendar policy at this process's
/// time (Redis's `TIME` cannot tell a zone's calendar), and its key expires
/// at the window's end, a client clock's slack later.
#[tokio::test]
async fn a_calendar_key_expires_at_its_window_end_and_redis_time_is_not_used() {
    let both = BothStores::start().await;
    both.clock.set_us(us("2026-10-25T20:00Z")); // 21:00 on Paris's 25-hour day
    let limiter = Limiter::new("expiry", Policy::fixed_window("2/1d@Europe/Paris").unwrap(), &both.redis);
    limiter.check("k", 1).await.unwrap();
    let client = redis::Client::open(both.server.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let key = "redlimit:fixed_window/v3:6:expiry:k";
    let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut connection).await.unwrap();
    assert_eq!((ttl + 999) / 1000, 3 * 3600 + 60, "to Paris's midnight, and the client clock's minute");

    let on_redis_clock = redlimit::Store::redis(&both.server.url()).await.unwrap();
    let daily = Limiter::new("server-clock", Policy::fixed_window("2/1d@UTC").unwrap(), &on_redis_clock);
    let midnight_after = |at: std::time::SystemTime| {
        let s = at.duration_since(UNIX_EPOCH).unwrap().as_secs();
        Duration::from_secs((s / 86_400 + 1) * 86_400 - s)
    };
    let before = midnight_after(std::time::SystemTime::now());
    let first = daily.check("k", 1).await.unwrap();
    let after = midnight_after(std::time::SystemTime::now());
    assert!(first.reset_after <= before && first.reset_after + Duration::from_secs(1) >= after, "{first:?}");
    assert_eq!(daily.check("k", 1).await.unwrap().remaining, 0);
    assert!(!daily.check("k", 1).await.unwrap().allowed);
}

/// Prefetched permits of a calendar day are not spent after its midnight:
/// each day admits exactly its limit, on both stores.
#[tokio::test]
async fn prefetched_permits_end_with_their_calendar_day() {
    let both = BothStores::start().await;
    let day = Calendar::new(CalendarUnit::Day, "America/New_York").unwrap();
    for store in [&both.memory, &both.redis] {
        let policy = Policy::fixed_window("10/1d@America/New_York").unwrap();
        let limiter = Limiter::new(format!("prefetch-{}", store.kind()), policy, store)
            .with_deny_cache(false)
            .with_prefetch_ttl(4, Duration::from_secs(3600))
            .unwrap();
        // 23:59:50 in New York on the day before the clocks fall back, then past its midnight.
        let mut per_day: HashMap<u64, u64> = HashMap::new();
        for (at, calls) in [("2026-11-01T03:59Z", 7), ("2026-11-01T04:00Z", 30)] {
            both.clock.set_us(us(at) + 50 * 1_000_000);
            for _ in 0..calls {
                let d = limiter.check("k", 1).await.unwrap();
                if d.allowed {
                    let t = d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
                    *per_day.entry(day.window_at(t).unwrap().0).or_default() += 1;
                }
            }
        }
        let mut counts: Vec<u64> = per_day.values().copied().collect();
        counts.sort_unstable();
        assert_eq!(counts, [7, 10], "on {}: {per_day:?}", store.kind());
    }
}
