//! A fixed window's state across plan changes, on Redis's own clock, where
//! a policy of one strategy is a counter and one of several a hash: both
//! stores keep one state for them, so a policy gaining a strategy keeps
//! counting what the first strategy counted, and losing it too; a window
//! runs from its start by the length of the policy deciding it, so one that
//! grows never restarts at the shorter window's end; and a window the
//! policy lacks counts every admitted call while it runs.

use redlimit::{Decision, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::time::{Duration, UNIX_EPOCH};

/// The memory store and Redis, each on its own clock.
async fn stores(server: &RedisServer) -> [(&'static str, Store); 2] {
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    [("memory", Store::memory()), ("redis", Store::redis_with(&server.url(), patient).await.unwrap())]
}

fn micros(decision: &Decision) -> u64 {
    decision.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// When the first strategy's window ends, as `decision` reports it.
fn first_window_end(decision: &Decision) -> u64 {
    let reset = decision.quotas.first().map_or(decision.reset_after, |q| q.reset_after);
    micros(decision) + reset.as_micros() as u64
}

/// One key through 10/1s, then 10/1s,100/1m, then back, and so on: every
/// call inside the first call's window (judged 10 ms or more before it
/// ends), so exactly 10 pass. `None` when the machine was too slow for
/// that (the window ended during the run): the caller tries again.
async fn one_window_through_the_plans(limiter: &Limiter, key: &str) -> Option<usize> {
    let one = Policy::fixed_window("10/1s").unwrap();
    let two = Policy::fixed_window("10/1s,100/1m").unwrap();
    // (policy, calls): takes 4, 3 (the counter becomes the hash), 3 (and
    // back), then each is denied.
    let plan = [(&one, 4), (&two, 3), (&one, 3), (&two, 2), (&one, 2)];
    let mut end = None;
    let mut passed = 0;
    for (policy, calls) in plan {
        for _ in 0..calls {
            let decision = limiter.with_policy(policy).check(key, 1).await.unwrap();
            let window_end = *end.get_or_insert(first_window_end(&decision));
            if micros(&decision) + 10_000 >= window_end {
                return None;
            }
            // The window carried across the forms: never started again.
            let own_end = first_window_end(&decision);
            assert!(own_end.abs_diff(window_end) <= 5_000, "{policy}: ends at {own_end}, the window at {window_end}");
            passed += usize::from(decision.allowed);
        }
    }
    Some(passed)
}

#[tokio::test]
async fn a_policy_gaining_a_strategy_and_losing_it_keeps_counting_on_redis_clock() {
    let server = RedisServer::start();
    for (at, store) in stores(&server).await {
        let limiter = Limiter::new("plans", Policy::fixed_window("10/1s").unwrap(), &store).with_deny_cache(false);
        let mut runs = 0;
        for attempt in 0..20 {
            if let Some(passed) = one_window_through_the_plans(&limiter, &format!("k{attempt}")).await {
                assert_eq!(passed, 10, "{at}: 10/1s admits 10 in a window, whatever strategies join it");
                runs += 1;
            }
        }
        assert!(runs > 0, "{at}: no run fit in one window");
    }
}

/// The same plans on windows no run outlasts: the count and the window's
/// end carry both ways, and the second strategy counts from the change.
#[tokio::test]
async fn both_stores_share_one_state_across_strategies_on_redis_clock() {
    let server = RedisServer::start();
    let one = Policy::fixed_window("10/1h").unwrap();
    let two = Policy::fixed_window("10/1h,12/1d").unwrap();
    for (at, store) in stores(&server).await {
        let limiter = Limiter::new("shared", one.clone(), &store).with_deny_cache(false);
        let first = limiter.check("k", 6).await.unwrap();
        let end = first_window_end(&first);
        let gained = limiter.with_policy(&two).check("k", 3).await.unwrap();
        assert!(gained.allowed, "{at}");
        let remaining: Vec<u64> = gained.quotas.iter().map(|q| q.remaining).collect();
        assert_eq!(remaining, [1, 9], "{at}: the hour kept its 6; the day counts from the change");
        assert!(first_window_end(&gained).abs_diff(end) <= 5_000, "{at}: the hour's window carried");
        let lost = limiter.check("k", 1).await.unwrap();
        assert_eq!((lost.allowed, lost.remaining), (true, 0), "{at}: back to one strategy, 9 + 1");
        assert!(first_window_end(&lost).abs_diff(end) <= 5_000, "{at}: and its window still");
        assert!(!limiter.check("k", 1).await.unwrap().allowed, "{at}");
        assert!(!limiter.with_policy(&two).check("k", 1).await.unwrap().allowed, "{at}");
    }
}

/// A counter left by a policy of a longer window is read under a shorter
/// one as a window of the shorter length from the same start.
#[tokio::test]
async fn a_shorter_window_reads_a_longer_ones_count() {
    let server = RedisServer::start();
    for (at, store) in stores(&server).await {
        let limiter = Limiter::new("shorter", Policy::fixed_window("5/1h").unwrap(), &store).with_deny_cache(false);
        limiter.check("k", 3).await.unwrap();
        let short = Policy::fixed_window("5/1s").unwrap();
        let peek = limiter.with_policy(&short).peek("k", 1).await.unwrap();
        assert_eq!((peek.allowed, peek.remaining), (true, 1), "{at}");
        let decision = limiter.with_policy(&short).check("k", 2).await.unwrap();
        assert_eq!((decision.allowed, decision.remaining), (true, 0), "{at}: the 3 still count");
        assert!(decision.reset_after <= Duration::from_secs(1), "{at}: {decision:?}");
        let denied = limiter.with_policy(&short).check("k", 1).await.unwrap();
        assert!(denied.retry_after.is_some_and(|retry| retry <= Duration::from_millis(1_001)), "{at}: {denied:?}");
    }
}

/// A refund finds the other form too: each form gives back by its own
/// rule, to every window that counted the refunded call, those the
/// refunding policy lacks too (they count its calls while they run).
#[tokio::test]
async fn a_refund_gives_back_across_the_forms() {
    let server = RedisServer::start();
    let one = Policy::fixed_window("10/1h").unwrap();
    let two = Policy::fixed_window("10/1h,12/1d").unwrap();
    let remaining = |d: &Decision| d.quotas.iter().map(|q| q.remaining).collect::<Vec<_>>();
    for (at, store) in stores(&server).await {
        // Taken as a counter, given back through the hash's script.
        let counted = Limiter::new("counted", one.clone(), &store).with_deny_cache(false);
        let taken = counted.check("k", 5).await.unwrap();
        let after = counted.with_policy(&two).refund("k", 2, &taken).await.unwrap();
        assert_eq!(remaining(&after), [7, 12], "{at}");
        assert_eq!(counted.check("k", 7).await.unwrap().remaining, 0, "{at}");

        // Taken in the hash, given back through the counter's script.
        let hashed = Limiter::new("hashed", two.clone(), &store).with_deny_cache(false);
        let taken = hashed.check("k", 3).await.unwrap();
        let after = hashed.with_policy(&one).refund("k", 2, &taken).await.unwrap();
        assert_eq!(after.remaining, 9, "{at}");
        let next = hashed.check("k", 1).await.unwrap();
        assert_eq!(remaining(&next), [8, 10], "{at}: the hour and the day each gave 2 back");
    }
}

/// `taken` calls under `short`, 3 under `long`, then 20 more under `long`
/// once `short`'s window has ended: how many passed of those decided within
/// `long`'s window from the first call (5 ms of margin for the ms Redis
/// times a counter in).
async fn admitted_as_the_window_grows(
    limiter: &Limiter,
    taken: u64,
    short: (&Policy, u64),
    long: (&Policy, u64),
) -> usize {
    let first = limiter.with_policy(short.0).check("k", taken).await.unwrap();
    assert!(first.allowed);
    let end = first_window_end(&first) - short.1 + long.1;
    let mut admitted = taken as usize;
    for _ in 0..3 {
        admitted += usize::from(limiter.with_policy(long.0).check("k", 1).await.unwrap().allowed);
    }
    // Past the shorter window's end, inside the longer one's.
    tokio::time::sleep(Duration::from_micros(short.1 + 100_000)).await;
    for _ in 0..20 {
        let decision = limiter.with_policy(long.0).check("k", 1).await.unwrap();
        if micros(&decision) + 5_000 < end {
            admitted += usize::from(decision.allowed);
        }
    }
    admitted
}

/// A window that grows runs to its start plus the longer window, on both
/// stores and through each form: on Redis's clock the counter knows the
/// window it was written under, so its start, and never ends at the
/// shorter window's TTL; a window full before the change is kept to the
/// longer end by the denials. The cases run side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_that_grows_counts_from_its_start_on_redis_clock() {
    let server = RedisServer::start();
    let (second, hour) = (1_000_000, 3_600_000_000);
    let cases = [
        ("10/1s", "10/1h", hour, 4),
        ("10/1s", "10/1h", hour, 10),
        ("10/1s", "10/2s", 2_000_000, 4),
        ("10/1s", "10/2s", 2_000_000, 10),
        // The hash's script meets the counter; the hash alone; the
        // counter's script meets a hash with a window it lacks.
        ("10/1s", "10/1h,20/1d", hour, 10),
        ("10/1s,20/1d", "10/1h,20/1d", hour, 10),
        ("10/1s,20/1d", "10/1h", hour, 10),
        // A limit past the counter's: a hash of one strategy, which the
        // counter's script turns into its counter, or keeps when denied.
        ("2000000/1s", "10/1h", hour, 4),
        ("2000000/1s", "10/1h", hour, 10),
    ];
    let mut runs = Vec::new();
    for (at, store) in stores(&server).await {
        for (n, (short, long, long_us, taken)) in cases.into_iter().enumerate() {
            let store = store.clone();
            runs.push(tokio::spawn(async move {
                let (short, long) = (Policy::fixed_window(short).unwrap(), Policy::fixed_window(long).unwrap());
                let limiter = Limiter::new(format!("grows{n}"), short.clone(), &store).with_deny_cache(false);
                let admitted = admitted_as_the_window_grows(&limiter, taken, (&short, second), (&long, long_us)).await;
                assert!(admitted <= 10, "{at}: {short} then {long} admitted {admitted} in {long}'s window");
            }));
        }
    }
    for run in runs {
        run.await.unwrap();
    }
}

/// 90 calls under 10/200ms,100/1m, 10 under 10/200ms (the counter's script
/// on Redis's clock), then 100 more tries under the first policy, each 10
/// in a window of their own: within the minute from the first call, at most
/// 100 pass, for the minute's window, which 10/200ms lacks, counted its 10.
#[tokio::test]
async fn a_window_the_policy_lacks_counts_every_call_while_it_runs_on_redis_clock() {
    let server = RedisServer::start();
    let both = Policy::fixed_window("10/200ms,100/1m").unwrap();
    let one = Policy::fixed_window("10/200ms").unwrap();
    for (at, store) in stores(&server).await {
        let limiter = Limiter::new("lacks", both.clone(), &store).with_deny_cache(false);
        let (mut end, mut passed) = (None, 0);
        for round in 0..20 {
            let policy = if round == 9 { &one } else { &both };
            for _ in 0..10 {
                let decision = limiter.with_policy(policy).check("k", 1).await.unwrap();
                let end = *end.get_or_insert(micros(&decision) + 60_000_000);
                if micros(&decision) + 5_000 < end {
                    passed += usize::from(decision.allowed);
                }
            }
            // Past the 200 ms window's end (Redis adds at most 1 ms).
            tokio::time::sleep(Duration::from_millis(210)).await;
        }
        assert!(passed <= 100, "{at}: {passed} passed within the minute of 100");
    }
}
