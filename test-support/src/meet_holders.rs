//! The permit holders of `tests/features_meet.rs`'s concurrency part: tasks
//! that acquire and give back by `release().await` or by drop, acquisitions
//! cancelled by a short timeout, and holders stopped past their lease. Each
//! permit held is a [`Hold`] for [`meet::most_live`](crate::meet::most_live).

use crate::meet::{Draws, Hold};
use redlimit::{Decision, Limiter, OnError, Policy, Store};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

fn at_us(decision: &Decision) -> u64 {
    decision.decided_at.duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

/// The permits a key allows at once.
pub const LIMIT: u64 = 3;
const LEASE: Duration = Duration::from_millis(300);
/// Holders per process stopped past their lease (no renewal can run).
const STOPPED: usize = 2;

fn holders_limiter(store: &Store) -> Limiter {
    Limiter::new("meet-concurrency", Policy::concurrency(LIMIT, "300ms").unwrap(), store).with_on_error(OnError::Deny)
}

/// One process's holders: `tasks` tasks acquiring, each permit given back
/// by `release().await` or by drop, some acquisitions cancelled by a short
/// timeout; and `STOPPED` holders whose runtime is blocked past the lease.
pub async fn holders(store: &Store, seed: u64, actions: usize, tasks: usize) -> Vec<Hold> {
    // The tasks go on past their count while a stopped holder is stopped, so others want its permit.
    let stopping = Arc::new(AtomicUsize::new(STOPPED));
    let stopped: Vec<_> = (0..STOPPED)
        .map(|i| {
            let (limiter, start) = (holders_limiter(store), Duration::from_millis(20 + 100 * i as u64));
            let stopping = stopping.clone();
            std::thread::spawn(move || {
                let hold = stopped_holder(limiter, start);
                stopping.fetch_sub(1, Ordering::Relaxed);
                hold
            })
        })
        .collect();
    let tasks: Vec<_> = (0..tasks)
        .map(|task| {
            let (limiter, stopping) = (holders_limiter(store), stopping.clone());
            let mut rng = Draws::new(seed.wrapping_mul(31).wrapping_add(task as u64));
            tokio::spawn(async move {
                let mut holds = Vec::new();
                for done in 0.. {
                    if done >= actions / tasks && stopping.load(Ordering::Relaxed) == 0 {
                        break;
                    }
                    let action = rng.below(10);
                    let cancel_after = Duration::from_micros(rng.below(400));
                    let permit = match action {
                        0 | 1 => match tokio::time::timeout(cancel_after, limiter.acquire("hot")).await {
                            Ok(permit) => permit,
                            Err(_) => continue, // cancelled
                        },
                        _ => limiter.acquire("hot").await,
                    };
                    let Ok(permit) = permit else {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    };
                    let from_us = at_us(permit.decision());
                    tokio::time::sleep(Duration::from_micros(rng.below(3_000))).await;
                    let until_us = wall_us();
                    if action < 6 {
                        drop(permit);
                    } else {
                        let _ = permit.release().await;
                    }
                    holds.push(Hold { from_us, until_us, stopped_us: None, told_lost: false, woke_us: 0 });
                }
                holds
            })
        })
        .collect();
    let mut holds = Vec::new();
    for task in tasks {
        holds.extend(task.await.unwrap());
    }
    holds.extend(stopped.into_iter().filter_map(|s| s.join().unwrap()));
    holds
}

/// A holder on a runtime of its own, which it blocks for twice the lease
/// once it holds a permit (as a stopped process would): its renewals
/// cannot run. Then it asks whether it still holds the permit.
fn stopped_holder(limiter: Limiter, start: Duration) -> Option<Hold> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        tokio::time::sleep(start).await;
        for _ in 0..2_000 {
            let Ok(permit) = limiter.acquire("hot").await else {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            };
            let from_us = at_us(permit.decision());
            let stopped_us = wall_us();
            std::thread::sleep(2 * LEASE);
            let woke_us = wall_us();
            // Running again: it is told once its renewal finds the lease
            // ended, which a lease's time bounds (polled in steps, as a body would).
            let mut told_lost = false;
            for _ in 0..LEASE.as_millis() / 5 {
                told_lost = !permit.is_held();
                if told_lost {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let until_us = wall_us();
            let _ = permit.release().await;
            return Some(Hold { from_us, until_us, stopped_us: Some(stopped_us), told_lost, woke_us });
        }
        None
    })
}
