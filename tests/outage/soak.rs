//! Soak, briefly: 32 tasks decide on 8 keys of a private Redis while it is
//! killed (SIGKILL) and restarted, left idle past its idle `timeout` (so it
//! closes every client), and kept down while calls meet refused connects.
//! Restarts that keep Redis's data (append-only file, fsync always) admit
//! nothing extra; restarts that lose it are caught as over-admissions.
//! (`examples/soak.rs` is the long version, timed, at full speed.)
//!
//! Bounded by counts, never by time, so a slow machine sees the same run:
//! each task makes a fixed number of calls that Redis decides (calls that
//! fail while it is down are retried, not counted), in phases; an event
//! comes between two phases (a restart once half the calls of the phase
//! before it are decided, an idle spell once all are, an outage of a fixed
//! number of failed calls), and no task starts the next phase before it.
//! The window is an hour: any key admitted more than the limit is an
//! over-admission.

use redlimit::{Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: u64 = 50;
const KEYS: usize = 8;
const TASKS: u64 = 32;
/// Decided calls per task in each phase; an event between phases.
const PER_PHASE: u64 = 20;
/// Longer than the server's idle `timeout` of one second.
const IDLE: Duration = Duration::from_millis(2500);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    /// SIGKILL and start again at once, halfway through a phase.
    Restart,
    /// Every task waits, so Redis closes every idle client.
    IdleSpell,
    /// SIGKILL, and start again only after this many calls failed.
    Outage(u64),
}

struct Soak {
    events: u64,
    decisions: u64,
    /// Failed calls in each phase.
    errors: Vec<u64>,
    /// Connections Redis accepted after each idle spell's phase began.
    reconnects_after_idle: u64,
    /// Admitted calls beyond the limit, summed over the keys.
    over: u64,
}

async fn soak(keep_data: bool, events: &[Event]) -> Soak {
    let port = free_port();
    let aof: &[&str] =
        if keep_data { &["--appendonly", "yes", "--appendfsync", "always"] } else { &["--appendonly", "no"] };
    let mut server = RedisServer::start_with(port, &[aof, &["--timeout", "1"]].concat(), None);
    let store = Store::redis_with(&server.url(), RedisOptions::default()).await.expect("connect to the private Redis");
    // Every decision goes to Redis: the deny cache would keep denying the
    // keys whose state a restart lost, and hide it.
    let limiter =
        Limiter::new("soak", Policy::sliding_log(&format!("{LIMIT}/1h")).unwrap(), &store).with_deny_cache(false);
    let phases = events.len() + 1;
    let (decided, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (released, phases_released) = tokio::sync::watch::channel(0usize);

    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (limiter, decided, failed) = (limiter.clone(), decided.clone(), failed.clone());
            let mut phases_released = phases_released.clone();
            tokio::spawn(async move {
                let (mut admitted, mut errors) = (vec![0u64; KEYS], vec![0u64; phases]);
                let mut i = task as usize;
                // Only a server that never comes back gets here.
                let deadline = Instant::now() + Duration::from_secs(120);
                for (phase, phase_errors) in errors.iter_mut().enumerate() {
                    phases_released.wait_for(|&n| n >= phase).await.unwrap();
                    let mut made = 0;
                    while made < PER_PHASE {
                        let key = i % KEYS;
                        i += 1;
                        match limiter.check(format!("key-{key}"), 1).await {
                            Ok(d) => {
                                made += 1;
                                decided.fetch_add(1, Ordering::Relaxed);
                                admitted[key] += u64::from(d.allowed);
                            }
                            Err(_) => {
                                *phase_errors += 1;
                                failed.fetch_add(1, Ordering::Relaxed);
                                assert!(Instant::now() < deadline, "Redis never came back");
                                // Redis is away: don't spin on fast failures.
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                        }
                    }
                }
                (admitted, errors)
            })
        })
        .collect();

    let wait_decided = |n: u64| {
        let decided = decided.clone();
        async move {
            while decided.load(Ordering::Relaxed) < n {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    };
    let mut reconnects_after_idle = 0;
    for (i, event) in events.iter().enumerate() {
        let before = i as u64 * TASKS * PER_PHASE;
        match *event {
            Event::Restart => {
                wait_decided(before + TASKS * PER_PHASE / 2).await;
                tokio::task::block_in_place(|| server.restart());
            }
            Event::IdleSpell => {
                wait_decided(before + TASKS * PER_PHASE).await;
                tokio::time::sleep(IDLE).await;
            }
            Event::Outage(calls) => {
                wait_decided(before + TASKS * PER_PHASE / 2).await;
                let failed_before = failed.load(Ordering::Relaxed);
                tokio::task::block_in_place(|| server.kill());
                while failed.load(Ordering::Relaxed) < failed_before + calls {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                tokio::task::block_in_place(|| server.restart());
            }
        }
        let connections = server.connections_received();
        released.send_replace(i + 1);
        if *event == Event::IdleSpell {
            wait_decided(before + 2 * TASKS * PER_PHASE).await;
            reconnects_after_idle += server.connections_received() - connections;
        }
    }

    let (mut per_key, mut errors) = (vec![0u64; KEYS], vec![0u64; phases]);
    for task in tasks {
        let (admitted, e) = task.await.expect("no task panicked");
        for (phase, n) in e.into_iter().enumerate() {
            errors[phase] += n;
        }
        for (key, n) in admitted.into_iter().enumerate() {
            per_key[key] += n;
        }
    }
    let soak = Soak {
        events: *phases_released.borrow() as u64,
        decisions: decided.load(Ordering::Relaxed),
        errors,
        reconnects_after_idle,
        over: per_key.iter().map(|&n| n.saturating_sub(LIMIT)).sum(),
    };
    println!(
        "keep data {keep_data}, events {events:?}: {} decisions, errors per phase {:?}, {} reconnects after idle spells, admitted per key {per_key:?}, {} over-admitted",
        soak.decisions, soak.errors, soak.reconnects_after_idle, soak.over
    );
    soak
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_that_keep_the_data_admit_nothing_extra() {
    let soak = soak(true, &[Event::Restart, Event::Restart]).await;
    assert_eq!(soak.over, 0);
    assert_eq!(soak.events, 2);
    assert_eq!(soak.decisions, TASKS * PER_PHASE * 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_that_lose_the_data_are_caught() {
    let soak = soak(false, &[Event::Restart, Event::Restart]).await;
    assert!(soak.over > 0, "restarts lost every key's log, yet nothing was over-admitted");
}

/// Idle disconnects cost no call; refused connects fail calls only while
/// Redis is down; neither admits anything extra.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_disconnects_and_refused_connects_admit_nothing_extra() {
    // An outage and a restart come halfway through phases 0 and 1; the idle
    // spells after phases 2 and 3.
    let events = [Event::Outage(TASKS * 4), Event::Restart, Event::IdleSpell, Event::IdleSpell];
    let soak = soak(true, &events).await;
    assert_eq!(soak.over, 0);
    assert_eq!(soak.decisions, TASKS * PER_PHASE * 5);
    // The phases right after an idle spell: Redis healthy, no call failed.
    assert_eq!(soak.errors[3..], [0, 0], "errors per phase {:?}", soak.errors);
    assert!(soak.errors[0] >= TASKS * 4, "the outage's refused connects failed calls: {:?}", soak.errors);
    assert!(soak.reconnects_after_idle >= 2, "Redis closed the idle clients: {}", soak.reconnects_after_idle);
}
