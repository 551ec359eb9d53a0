//! A bucket's or gcra's refund gives back only what the refunded call still
//! holds: never more than the state would have had if that call had never
//! been made, however late the refund comes. Right away, all of its
//! permits; after the bucket refilled, nothing; and in an upstream outage
//! (every call of the first second refunded 200 to 400 ms later) the calls
//! that were not refunded never pass more than the policy allows. Both
//! stores, on a manual clock; bounded by a count of calls.

use redlimit::{Decision, Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::collections::VecDeque;
use std::time::{Duration, UNIX_EPOCH};

const ALGORITHMS: [&str; 3] = ["token_bucket", "leaky_bucket", "gcra"];

/// `algo` holding `capacity` at `rate` (gcra: burst `capacity - 1`).
fn policy(algo: &str, capacity: u64, rate: &str) -> Policy {
    match algo {
        "token_bucket" => Policy::token_bucket(capacity, rate),
        "leaky_bucket" => Policy::leaky_bucket(capacity, rate),
        _ => Policy::gcra(rate, capacity - 1),
    }
    .unwrap()
}

/// Gives back `n` permits of the call `of` answered.
async fn refund(limiter: &Limiter, key: &str, n: u64, of: &Decision) -> Decision {
    limiter.refund(key, n, of).await.unwrap()
}

#[tokio::test]
async fn a_refund_right_away_gives_back_the_calls_permits() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            let limiter = Limiter::new(format!("now-{algo}"), policy(algo, 3, "1/1s"), store).with_deny_cache(false);
            let first = limiter.check("k", 2).await.unwrap();
            assert_eq!((first.allowed, first.remaining), (true, 1), "{backend} {algo}");
            let after = refund(&limiter, "k", 2, &first).await;
            assert_eq!((after.allowed, after.remaining), (true, 3), "{backend} {algo}: {after:?}");
            assert_eq!(after.reset_after, Duration::ZERO, "{backend} {algo}: untouched again");
        }
    }
}

#[tokio::test]
async fn a_refund_after_the_bucket_refilled_gives_nothing_and_one_midway_gives_what_is_left() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            let limiter = Limiter::new(format!("late-{algo}"), policy(algo, 3, "1/1s"), store).with_deny_cache(false);
            let first = limiter.check("k", 3).await.unwrap();
            assert!(first.allowed, "{backend} {algo}");
            // Refilled: the first call's permits were paid off; three more are taken.
            both.clock.advance(Duration::from_secs(3));
            assert!(limiter.check("k", 3).await.unwrap().allowed, "{backend} {algo}");
            let after = refund(&limiter, "k", 3, &first).await;
            assert_eq!(after.remaining, 0, "{backend} {algo}: a refund of a call paid off gave {after:?}");
            assert!(!limiter.check("k", 1).await.unwrap().allowed, "{backend} {algo}");

            // 1 s after a call of 3, 2 of its permits are still owed: those come back.
            let key = "midway";
            let call = limiter.check(key, 3).await.unwrap();
            both.clock.advance(Duration::from_secs(1));
            assert!(limiter.check(key, 1).await.unwrap().allowed, "{backend} {algo}");
            let after = refund(&limiter, key, 3, &call).await;
            // As if only the second call had been made: 1 owed, room for 2.
            assert_eq!(after.remaining, 2, "{backend} {algo}: {after:?}");
            assert_eq!(after.reset_after, Duration::from_secs(1), "{backend} {algo}: {after:?}");
        }
    }
}

#[tokio::test]
async fn a_refund_after_a_faster_rate_took_over_counts_what_the_faster_rate_paid() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            let slow = Limiter::new(format!("pace-{algo}"), policy(algo, 10, "1/1s"), store).with_deny_cache(false);
            let fast = slow.with_policy(&policy(algo, 10, "10/1s"));
            let call = slow.check("k", 5).await.unwrap();
            // A check under the faster rate converts the key's state to it.
            assert_eq!(fast.check("k", 0).await.unwrap().remaining, 5, "{backend} {algo}");
            // 400 ms at 10/s pay off 4 of the 5; another call takes 4.
            both.clock.advance(Duration::from_millis(400));
            assert_eq!(fast.check("k", 4).await.unwrap().remaining, 5, "{backend} {algo}");
            // Without the refunded call only the last 4 would be owed: 1 of its
            // 5 comes back, not the 4.6 the slow rate alone would have left it.
            let after = refund(&slow, "k", 5, &call).await;
            assert_eq!(after.remaining, 6, "{backend} {algo}: {after:?}");
            assert_eq!(fast.peek("k", 0).await.unwrap().remaining, 6, "{backend} {algo}");
        }
    }
}

/// One token per 1 000 µs: 1 000 per second, capacity 100.
const COUNT: u128 = 1_000;
const PERIOD_US: u128 = 1_000_000;
const CAPACITY: u128 = 100;

/// How many of `hits` (admitted `(µs, cost)`, in time order) a bucket of
/// [`CAPACITY`] refilled at [`COUNT`] per [`PERIOD_US`] would have denied.
fn over_admitted(hits: &[(u64, u64)]) -> usize {
    let (mut debt, mut last, mut over) = (0u128, None::<u64>, 0);
    for &(t, cost) in hits {
        if let Some(last) = last {
            debt = debt.saturating_sub((t - last) as u128 * COUNT);
        }
        last = Some(t);
        debt += cost as u128 * PERIOD_US;
        if debt > CAPACITY * PERIOD_US {
            over += 1;
            debt = CAPACITY * PERIOD_US;
        }
    }
    over
}

fn micros(d: &Decision) -> u64 {
    d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

#[tokio::test]
async fn an_outage_refunding_every_call_of_its_second_late_never_passes_more_than_the_policy() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            let limiter =
                Limiter::new(format!("outage-{algo}"), policy(algo, 100, "1000/1s"), store).with_deny_cache(false);
            let start = redlimit::Clock::now_us(&both.clock).unwrap();
            // A call every 500 µs for 2 s (twice the rate); those admitted in the first second
            // fail upstream and are refunded 200 to 400 ms after they were taken.
            let mut pending: VecDeque<(u64, Decision)> = VecDeque::new();
            let (mut kept, mut admitted, mut refunded) = (Vec::new(), 0, 0);
            for i in 0..4_000u64 {
                let now = start + i * 500;
                while pending.front().is_some_and(|(due, _)| *due <= now) {
                    let (due, call) = pending.pop_front().unwrap();
                    both.clock.set_us(due);
                    refund(&limiter, "k", 1, &call).await;
                    refunded += 1;
                }
                both.clock.set_us(now);
                let d = limiter.check("k", 1).await.unwrap();
                if !d.allowed {
                    continue;
                }
                admitted += 1;
                if i < 2_000 {
                    // 200 to 400 ms, drawn from a fixed sequence; due times stay in order
                    // enough for a queue kept sorted by insertion.
                    let delay = 200_000 + (i * 7_919) % 200_001;
                    let due = now + delay;
                    let at = pending.iter().position(|(other, _)| *other > due).unwrap_or(pending.len());
                    pending.insert(at, (due, d));
                } else {
                    kept.push((micros(&d), 1));
                }
            }
            let over = over_admitted(&kept);
            assert_eq!(
                over,
                0,
                "{backend} {algo}: {over} of {} kept calls over the policy ({admitted} admitted, {refunded} refunded)",
                kept.len()
            );
            assert!(refunded > 100, "{backend} {algo}: only {refunded} refunds");
        }
    }
}
