//! Redis killed, frozen and restarted under concurrent load: every call
//! returns within its timeout plus a margin, `on_error` decides while the
//! store is away, and decisions flow through Redis again by themselves
//! (within a count of probes, not a time).

use redlimit::{Error, Limiter, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::RedisServer;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(200);
/// Scheduling slack on a loaded 2-core machine.
const MARGIN: Duration = Duration::from_millis(300);
const TASKS: usize = 16;
/// Calls per task while Redis is away, and the pause after each: at least
/// 400 ms of outage, several of the store's 100 ms retry intervals.
const OUTAGE_CALLS: usize = 20;
const OUTAGE_PAUSE: Duration = Duration::from_millis(20);

#[derive(Debug, Default)]
struct Load {
    allowed: usize,
    denied: usize,
    denied_store_unavailable: usize,
    longest: Duration,
}

/// `TASKS` tasks, each on its own key of `phase`, calling `limit` `calls`
/// times with `pause` between calls: bounded by a count, so a slow machine
/// makes as many calls as a fast one, and the pauses make the phase last at
/// least `calls × pause` so that the store's retries happen during it.
/// Fresh keys per phase: a denial remembered by the deny cache is (rightly)
/// answered without asking the store at all.
async fn load(limiter: &Limiter, phase: &'static str, calls: usize, pause: Duration) -> Load {
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut load = Load::default();
                for _ in 0..calls {
                    let started = Instant::now();
                    match limiter.limit(format!("{phase}-{task}"), 1).await {
                        Ok(_) => load.allowed += 1,
                        Err(denied) if denied.reason() == redlimit::DenialReason::StoreUnavailable => {
                            load.denied_store_unavailable += 1
                        }
                        Err(_) => load.denied += 1,
                    }
                    load.longest = load.longest.max(started.elapsed());
                    tokio::time::sleep(pause).await;
                }
                load
            })
        })
        .collect();
    let mut total = Load::default();
    for task in tasks {
        let l = task.await.expect("no task panicked");
        total.allowed += l.allowed;
        total.denied += l.denied;
        total.denied_store_unavailable += l.denied_store_unavailable;
        total.longest = total.longest.max(l.longest);
    }
    total
}

/// Probes, each `PROBE_PAUSE` after the last, that a limiter may fail
/// once Redis is back: the breaker's 100 ms, the reconnect's backoff (at
/// most 1 s) and a connect fit many times over, on however slow a machine.
const RECOVERY_PROBES: usize = 100;
const PROBE_PAUSE: Duration = Duration::from_millis(20);

/// Failed probes until a call is decided by Redis again (not by `on_error`).
async fn recovery(limiter: &Limiter) -> usize {
    let mut failed = 0;
    while limiter.check("recovery-probe", 1).await.is_err() {
        failed += 1;
        assert!(failed <= RECOVERY_PROBES, "Redis not used again after {failed} probes");
        tokio::time::sleep(PROBE_PAUSE).await;
    }
    failed
}

fn signal(server: &RedisServer, signal: &str) {
    let pid = server.pid().unwrap().to_string();
    assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
}

/// What each policy must show while the store is away, with a limit of 5
/// per task key.
fn assert_policy(on_error: OnError, outage: &Load, what: &str) {
    let calls = outage.allowed + outage.denied + outage.denied_store_unavailable;
    assert!(calls > TASKS * 5, "{what}: too few calls to judge ({calls})");
    match on_error {
        OnError::Allow => assert_eq!(outage.allowed, calls, "{what}: {outage:?}"),
        OnError::Deny => assert_eq!(outage.denied_store_unavailable, calls, "{what}: {outage:?}"),
        // The in-memory stand-in applies the same policy: 5 per task key.
        OnError::Local => {
            assert_eq!((outage.allowed, outage.denied), (TASKS * 5, calls - TASKS * 5), "{what}: {outage:?}")
        }
    }
}

async fn outage_cycle(on_error: OnError) {
    let mut server = RedisServer::start();
    let options =
        RedisOptions::default().with_response_timeout(TIMEOUT).with_retry_interval(Duration::from_millis(100));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let limiter = Limiter::new(format!("outage-{on_error:?}"), Policy::fixed_window("5/1h").unwrap(), &store)
        .with_on_error(on_error);

    let healthy = load(&limiter, "healthy", 8, Duration::from_millis(2)).await;
    assert_eq!(
        (healthy.allowed, healthy.denied_store_unavailable),
        (TASKS * 5, 0),
        "{on_error:?} healthy: {healthy:?}"
    );

    // Killed: the state on Redis is gone with it.
    server.kill();
    let killed = load(&limiter, "killed", OUTAGE_CALLS, OUTAGE_PAUSE).await;
    assert_policy(on_error, &killed, &format!("{on_error:?} killed"));
    server.restart();
    let back_after_restart = recovery(&limiter).await;

    // Frozen: connections stay open, nothing answers.
    let limiter = Limiter::new(format!("frozen-{on_error:?}"), Policy::fixed_window("5/1h").unwrap(), &store)
        .with_on_error(on_error);
    signal(&server, "-STOP");
    let frozen = load(&limiter, "frozen", OUTAGE_CALLS, OUTAGE_PAUSE).await;
    signal(&server, "-CONT");
    assert_policy(on_error, &frozen, &format!("{on_error:?} frozen"));
    let back_after_freeze = recovery(&limiter).await;

    let longest = killed.longest.max(frozen.longest);
    println!(
        "on_error={on_error:?}: longest call {longest:?} (timeout {TIMEOUT:?}); back after {back_after_restart} failed probes after restart, {back_after_freeze} after freeze; {} store errors",
        limiter.store_errors()
    );
    assert!(longest <= TIMEOUT + MARGIN, "{on_error:?}: a call took {longest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_allow_lets_calls_through_while_redis_is_away() {
    outage_cycle(OnError::Allow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_deny_denies_with_store_unavailable_while_redis_is_away() {
    outage_cycle(OnError::Deny).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_local_decides_in_memory_while_redis_is_away() {
    outage_cycle(OnError::Local).await;
}

const FLUSHES: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn script_flush_under_load_is_invisible_to_callers() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("flush-load", Policy::token_bucket(1_000_000, "1000/1s").unwrap(), &store);
    // A flush after every 50 decided calls; the callers go on until the
    // last flush is done, so calls meet every one of them however fast or
    // slow the machine is.
    let decided = Arc::new(AtomicUsize::new(0));
    let flushes = Arc::new(AtomicUsize::new(0));
    let flusher = {
        let (url, decided, flushes) = (server.url(), decided.clone(), flushes.clone());
        tokio::spawn(async move {
            let mut con = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
            for flush in 1..=FLUSHES {
                while decided.load(Ordering::Relaxed) < flush * 50 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut con).await.unwrap();
                flushes.store(flush, Ordering::Relaxed);
            }
        })
    };
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let (limiter, decided, flushes) = (limiter.clone(), decided.clone(), flushes.clone());
            tokio::spawn(async move {
                let mut calls = 0;
                // At least one call after the last flush.
                let mut after_last = false;
                while !after_last {
                    after_last = flushes.load(Ordering::Relaxed) == FLUSHES;
                    limiter.check(format!("k{t}"), 1).await.expect("no caller sees an error");
                    calls += 1;
                    decided.fetch_add(1, Ordering::Relaxed);
                }
                calls
            })
        })
        .collect();
    let mut calls = 0;
    for task in tasks {
        calls += task.await.unwrap();
    }
    flusher.await.unwrap();
    assert!(calls > 100, "only {calls} calls");
    println!("{calls} calls across {FLUSHES} SCRIPT FLUSHes, no error");
}

/// A policy's first call while the breaker is open fails at once, as every
/// other call does: it does not first spend the response timeout trying to
/// load its script into a Redis that is not answering. The script is not
/// lost: once the breaker closes, the call's `EVALSHA` meets NOSCRIPT and
/// loads it.
#[tokio::test(flavor = "current_thread")]
async fn a_new_policys_first_call_while_the_breaker_is_open_does_not_load_its_script() {
    let logs = LogCapture::default();
    let _guard = logs.install_debug();
    let server = RedisServer::start();
    // Open for a second: far longer than the two calls below take.
    let options = RedisOptions::default().with_response_timeout(TIMEOUT).with_retry_interval(Duration::from_secs(1));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let known = Limiter::new("breaker-known", Policy::fixed_window("5/1h").unwrap(), &store);
    known.check("k", 1).await.unwrap();

    signal(&server, "-STOP");
    let timed_out = known.check("k", 1).await.unwrap_err();
    // A rate no other test uses: its script is made by this call.
    let new = Limiter::new("breaker-new", Policy::gcra("7/13s", 3).unwrap(), &store);
    let first = new.check("k", 1).await.unwrap_err();
    signal(&server, "-CONT");
    assert!(matches!(timed_out, Error::Timeout(_)), "{timed_out:?}: the frozen server opens the breaker");
    assert!(matches!(first, Error::Unavailable(_)), "{first:?}: the breaker's fast failure");
    let text = logs.text();
    assert!(!text.contains("could not load a policy's script"), "the first call tried to load it: {text}");

    recovery(&new).await;
    let decision = new.check("k", 1).await.unwrap();
    assert!(decision.allowed && decision.remaining == 3, "the script decides on Redis: {decision:?}");
}
