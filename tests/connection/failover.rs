//! Sentinel failovers the limiter learns of from the sentinels, not from
//! errors: a master that hangs (SIGSTOP) past a failover and comes back,
//! with a process started meanwhile, and one that crashes (SIGKILL). Three
//! sentinels, quorum 2, a replica; two where calls wait for replicas.

use redlimit::{Decision, Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_sentinel::SentinelSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: u64 = 20;

/// A response timeout (250 ms) and the time the limiter's lookups take to
/// find a master whose notification was missed (1 s), with room for a busy machine.
const FOLLOW_WITHIN: Duration = Duration::from_secs(3);

async fn started(set: &SentinelSet) -> Limiter {
    // One EVALSHA per call, so the servers' command counts are the calls.
    let options = RedisOptions::default().with_retry_interval(Duration::from_millis(50)).with_batching(false);
    let store = Store::redis_with(&set.url(), options).await.unwrap();
    let policy = Policy::fixed_window(&format!("{LIMIT}/1h")).unwrap();
    Limiter::new(set.name.as_str(), policy, &store).with_deny_cache(false)
}

/// Calls until one is answered; returns when, and how many timed out
/// (each may have been written to a hung master's socket). Only a failure
/// to reach Redis may surface meanwhile.
async fn until_answered(limiter: &Limiter, admitted: &mut u64) -> (Instant, u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut timeouts = 0;
    loop {
        match limiter.check("k", 1).await {
            Ok(decision) => {
                *admitted += u64::from(decision.allowed);
                return (Instant::now(), timeouts);
            }
            Err(e) => {
                assert!(e.is_unavailable(), "only a failure to reach Redis may surface: {e}");
                timeouts += u64::from(matches!(e, Error::Timeout(_)));
            }
        }
        assert!(Instant::now() < deadline, "no call was answered within a minute");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Calls until the limit denies, then a few more that must be denied too.
async fn until_denied(limiter: &Limiter, admitted: &mut u64) {
    let mut denied = 0;
    for _ in 0..10 * LIMIT {
        match limiter.check("k", 1).await {
            Ok(decision) if decision.allowed => *admitted += 1,
            Ok(_) => denied += 1,
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                tokio::time::sleep(Duration::from_millis(60)).await;
            }
        }
        if denied == 5 {
            return;
        }
    }
    panic!("the limit never denied: {admitted} admitted");
}

async fn admit_replicated(set: &SentinelSet, limiter: &Limiter, calls: u64) -> u64 {
    for _ in 0..calls {
        assert!(limiter.check("k", 1).await.unwrap().allowed);
    }
    assert_eq!(set.nodes[0].cli(&["WAIT", "1", "5000"]).trim(), "1", "the replica has the calls");
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_master_is_left_once_the_sentinels_name_another() {
    let set = Arc::new(SentinelSet::start("hung", 1));
    let (old, new) = (set.nodes[0].port(), set.nodes[1].port());
    let limiter = started(&set).await;
    let mut admitted = admit_replicated(&set, &limiter, 5).await;
    let ran_before = set.nodes[0].evalsha_calls().await;

    set.nodes[0].signal("STOP");
    let stopped = Instant::now();
    let watcher = {
        let set = set.clone();
        tokio::task::spawn_blocking(move || set.wait_named_other_than(old, Duration::from_secs(60)))
    };
    // Calls go on through the stop: they time out, or fail fast, until the limiter follows the sentinels.
    let (answered, timeouts) = until_answered(&limiter, &mut admitted).await;
    let (named_at, named) = watcher.await.unwrap();
    assert_eq!(named, new);
    eprintln!(
        "stopped → named {:?}, named → first answer {:?} ({timeouts} calls timed out)",
        named_at - stopped,
        answered.saturating_duration_since(named_at)
    );
    assert!(
        answered <= named_at + FOLLOW_WITHIN,
        "answered {:?} after the sentinels named the new master",
        answered - named_at
    );

    // A process that starts meanwhile finds the new master through the sentinels.
    let late = started(&set).await;
    // The old master runs again, still a master until the sentinels demote it.
    set.nodes[0].signal("CONT");
    until_denied(&limiter, &mut admitted).await;
    until_denied(&late, &mut admitted).await;
    assert_eq!(set.nodes[0].cli(&["PING"]).trim(), "PONG", "the old master is back");
    let ran_on_old = set.nodes[0].evalsha_calls().await - ran_before;
    // Calls that timed out may have sat in its socket while it was stopped, and run when it resumed;
    // no call answered, and none made since by either process, went to it.
    assert!(ran_on_old <= timeouts, "{ran_on_old} calls ran on the old master after it hung; {timeouts} timed out");
    assert!(admitted <= 2 * LIMIT, "{admitted} admitted: the limit is {LIMIT}");
    assert!(admitted >= LIMIT - timeouts, "{admitted} admitted: the count carried over");
    eprintln!("{admitted} admitted of {LIMIT}; {ran_on_old} calls ran on the old master after SIGCONT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_master_is_left_once_the_sentinels_name_another() {
    let set = Arc::new(SentinelSet::start("crashed", 1));
    let (old, new) = (set.nodes[0].port(), set.nodes[1].port());
    let limiter = started(&set).await;
    let mut admitted = admit_replicated(&set, &limiter, 5).await;

    set.nodes[0].signal("KILL");
    let killed = Instant::now();
    let watcher = {
        let set = set.clone();
        tokio::task::spawn_blocking(move || set.wait_named_other_than(old, Duration::from_secs(60)))
    };
    let (answered, _) = until_answered(&limiter, &mut admitted).await;
    let (named_at, named) = watcher.await.unwrap();
    assert_eq!(named, new);
    eprintln!(
        "killed → named {:?}, named → first answer {:?}",
        named_at - killed,
        answered.saturating_duration_since(named_at)
    );
    // Down-after plus the failover, which the sentinels' naming ends, plus
    // what the code bounds a switch by, with room for a busy machine.
    assert!(
        answered <= named_at + FOLLOW_WITHIN,
        "answered {:?} after the sentinels named the new master",
        answered - named_at
    );
    until_denied(&limiter, &mut admitted).await;
    assert!((LIMIT..=2 * LIMIT).contains(&admitted), "{admitted} admitted: the limit is {LIMIT}");
}

/// Calls on `limiters` in turn until each has been denied five times,
/// counting the admitted ones; a call the replicas did not acknowledge (or
/// that timed out) is retried after a pause. Returns the calls that failed.
async fn acked_until_denied(limiters: &[&Limiter], admitted: &mut u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut denied, mut failed) = (vec![0; limiters.len()], 0);
    while denied.iter().any(|&d| d < 5) {
        for (limiter, denied) in limiters.iter().zip(&mut denied) {
            match limiter.check("k", 1).await {
                Ok(Decision { allowed: true, .. }) => *admitted += 1,
                Ok(_) => *denied += 1,
                Err(e) => {
                    assert!(e.is_unavailable() || matches!(e, Error::Server(_)), "{e}");
                    failed += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        assert!(Instant::now() < deadline, "the limit never denied: {admitted} admitted, {failed} failed");
    }
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replica_acks_a_hung_master_over_admits_nothing() {
    // Two replicas, both acknowledging every answered call: whichever is
    // promoted has it. The new master has one replica until the old master
    // comes back as its second, and calls fail meanwhile.
    let set = Arc::new(SentinelSet::start("acked", 2));
    let old = set.nodes[0].port();
    // Timeouts with room for a busy machine: a start-up or a call that
    // timed out would say nothing about the acknowledgements.
    let options = RedisOptions::default()
        .with_connect_timeout(Duration::from_secs(10))
        .with_response_timeout(Duration::from_secs(2))
        .with_replica_acks(2, Duration::from_millis(200))
        .with_retry_interval(Duration::from_millis(50))
        .with_batching(false);
    let start = || async { Store::redis_with(&set.url(), options.clone()).await.unwrap() };
    let policy = Policy::fixed_window(&format!("{LIMIT}/1h")).unwrap();
    let limiter = Limiter::new("acked", policy.clone(), &start().await).with_deny_cache(false);
    let mut admitted = 0;
    for _ in 0..5 {
        assert!(limiter.check("k", 1).await.unwrap().allowed);
        admitted += 1;
    }

    set.nodes[0].signal("STOP");
    let named = {
        let set = set.clone();
        tokio::task::spawn_blocking(move || set.wait_named_other_than(old, Duration::from_secs(60)))
    };
    named.await.unwrap();
    // Once the store follows, the new master runs the calls but cannot have
    // them acknowledged by two replicas: each fails, and none is admitted.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match limiter.check("k", 1).await {
            Ok(decision) => panic!("a call was answered with one replica at most: {decision:?}"),
            Err(e) if e.to_string().contains("replicas asked had its writes") => break,
            Err(e) => assert!(e.is_unavailable(), "{e}"),
        }
        assert!(Instant::now() < deadline, "the store never reached the new master");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let late = Limiter::new("acked", policy, &start().await).with_deny_cache(false);

    // The old master comes back, is made a replica of the new one, and
    // calls pass again (found by a peek, which writes nothing but waits
    // for the replicas as a check does).
    set.nodes[0].signal("CONT");
    let deadline = Instant::now() + Duration::from_secs(90);
    while late.peek("k", 1).await.is_err() {
        assert!(Instant::now() < deadline, "calls never passed again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failed = acked_until_denied(&[&limiter, &late], &mut admitted).await;
    eprintln!("{admitted} admitted of {LIMIT}; {failed} calls failed their acknowledgement after SIGCONT");
    // At most one call counted without being answered: the one that found the new master.
    assert!(admitted >= LIMIT - 1 - failed, "{admitted} admitted: the count carried over");
    assert!(admitted <= LIMIT, "{admitted} admitted: the limit is {LIMIT}");
}
