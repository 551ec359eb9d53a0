//! Soak, briefly: 32 tasks decide on 8 keys of a private Redis that is
//! killed (SIGKILL) and restarted twice while they run. Restarts that keep
//! Redis's data (append-only file, fsync always) admit nothing extra;
//! restarts that lose it are caught as over-admissions.
//! (`examples/soak.rs` is the long version, timed, at full speed.)
//!
//! Bounded by counts, never by time, so a slow machine sees the same run:
//! each task makes a fixed number of calls that Redis decides (calls that
//! fail while it is down are retried, not counted), in three phases; each
//! restart comes once half the calls of the phase before it are decided,
//! while the other half are under way, and no task starts the next phase
//! before it. The window is an hour: any key admitted more than the limit
//! is an over-admission.

use ratelimit::{Limiter, Policy, RedisOptions, Store};
use ratelimit_test_support::redis_server::RedisServer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: u64 = 50;
const KEYS: usize = 8;
const TASKS: u64 = 32;
/// Decided calls per task in each phase; a restart between phases.
const PER_PHASE: u64 = 20;
const RESTARTS: u64 = 2;

struct Soak {
    restarts: u64,
    decisions: u64,
    errors: u64,
    /// Admitted calls beyond the limit, summed over the keys.
    over: u64,
}

async fn soak(keep_data: bool) -> Soak {
    let mut server = if keep_data { RedisServer::start_persistent() } else { RedisServer::start() };
    let store = Store::redis_with(&server.url(), RedisOptions::default()).await.expect("connect to the private Redis");
    // Every decision goes to Redis: the deny cache would keep denying the
    // keys whose state a restart lost, and hide it.
    let limiter =
        Limiter::new("soak", Policy::sliding_log(&format!("{LIMIT}/1h")).unwrap(), &store).with_deny_cache(false);
    let decided = Arc::new(AtomicU64::new(0));
    let (restarted, restarts_seen) = tokio::sync::watch::channel(0u64);

    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (limiter, decided, mut restarts_seen) = (limiter.clone(), decided.clone(), restarts_seen.clone());
            tokio::spawn(async move {
                let (mut admitted, mut errors) = (vec![0u64; KEYS], 0u64);
                let mut i = task as usize;
                // Only a server that never comes back gets here.
                let deadline = Instant::now() + Duration::from_secs(120);
                for phase in 0..=RESTARTS {
                    restarts_seen.wait_for(|&n| n >= phase).await.unwrap();
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
                                errors += 1;
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

    for restart in 1..=RESTARTS {
        let halfway = (restart - 1) * TASKS * PER_PHASE + TASKS * PER_PHASE / 2;
        while decided.load(Ordering::Relaxed) < halfway {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::task::block_in_place(|| server.restart());
        restarted.send_replace(restart);
    }

    let (mut per_key, mut errors) = (vec![0u64; KEYS], 0);
    for task in tasks {
        let (admitted, e) = task.await.expect("no task panicked");
        errors += e;
        for (key, n) in admitted.into_iter().enumerate() {
            per_key[key] += n;
        }
    }
    let soak = Soak {
        restarts: *restarts_seen.borrow(),
        decisions: decided.load(Ordering::Relaxed),
        errors,
        over: per_key.iter().map(|&n| n.saturating_sub(LIMIT)).sum(),
    };
    println!(
        "keep data {keep_data}: {} restarts, {} decisions, {} errors, admitted per key {per_key:?}, {} over-admitted",
        soak.restarts, soak.decisions, soak.errors, soak.over
    );
    soak
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_that_keep_the_data_admit_nothing_extra() {
    let soak = soak(true).await;
    assert_eq!(soak.over, 0);
    assert_eq!(soak.restarts, 2);
    assert_eq!(soak.decisions, TASKS * PER_PHASE * (RESTARTS + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_that_lose_the_data_are_caught() {
    let soak = soak(false).await;
    assert!(soak.over > 0, "restarts lost every key's log, yet nothing was over-admitted");
}
