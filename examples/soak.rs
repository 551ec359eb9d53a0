//! Soak: decisions at full speed against a private Redis that is killed
//! (SIGKILL) and restarted every 15 s (half a second past it), keeping its
//! data (append-only file, fsync always).
//!
//! ```sh
//! cargo run --release --example soak                  # 60 s, restart every 15 s
//! cargo run --release --example soak -- --seconds 20 --restart-every 5
//! cargo run --release --example soak -- --forget      # restarts lose the data:
//!                                                     # over-admissions show up
//! ```
//!
//! Prints decisions, errors by kind, over-admissions and the longest call,
//! and exits non-zero on any over-admission. An over-admission is counted
//! only when it is certain: `limit + 1` admitted calls of one key whose
//! whole send-to-answer spans fit inside one window (Redis reads the same
//! wall clock as this process, on this machine).

use ratelimit::{Error, Limiter, Policy, RedisOptions, Store};
use ratelimit_test_support::redis_server::RedisServer;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LIMIT: usize = 50;
const WINDOW_US: u64 = 1_000_000;
const KEYS: usize = 8;
const TASKS: usize = 32;

#[derive(Default)]
struct Tally {
    allowed: u64,
    denied: u64,
    errors: BTreeMap<&'static str, u64>,
    longest: Duration,
    /// Per key: (sent, answered) wall-clock µs of each admitted call.
    admitted: Vec<Vec<(u64, u64)>>,
}

fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

fn kind(error: &Error) -> &'static str {
    match error {
        Error::Timeout(_) => "timeout",
        Error::Unavailable(_) => "unavailable (failing fast)",
        Error::Store(_) if error.is_unavailable() => "connection",
        Error::Store(_) => "redis error",
        _ => "other",
    }
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a whole number of seconds"))
}

/// Certain over-admissions of one key: groups of LIMIT + 1 admitted calls
/// (in order of sending) that all happened within one window.
fn over_admissions(mut calls: Vec<(u64, u64)>) -> usize {
    calls.sort_unstable();
    calls
        .windows(LIMIT + 1)
        .filter(|group| {
            let latest_answer = group.iter().map(|&(_, answered)| answered).max().unwrap();
            latest_answer - group[0].0 < WINDOW_US
        })
        .count()
}

#[tokio::main]
async fn main() -> ExitCode {
    let seconds = arg("--seconds", 60);
    let restart_every = arg("--restart-every", 15);
    // --forget restarts Redis without its data, to show the check catches the
    // over-admissions that follow.
    let mut server = if flag("--forget") { RedisServer::start() } else { RedisServer::start_persistent() };
    let store = Store::redis_with(&server.url(), RedisOptions::default()).await.expect("connect to the private Redis");
    // Every decision goes to Redis: the deny cache would answer denials in
    // process and bunch admissions into bursts that hide lost state.
    let limiter =
        Limiter::new("soak", Policy::sliding_log(&format!("{LIMIT}/1s")).unwrap(), &store).with_deny_cache(false);
    let stop = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..TASKS)
        .map(|task| {
            let (limiter, stop) = (limiter.clone(), stop.clone());
            tokio::spawn(async move {
                let mut tally = Tally { admitted: vec![Vec::new(); KEYS], ..Tally::default() };
                let mut i = task;
                while !stop.load(Ordering::Relaxed) {
                    let key = i % KEYS;
                    i += 1;
                    let (sent, started) = (wall_us(), Instant::now());
                    let result = limiter.check(format!("key-{key}"), 1).await;
                    tally.longest = tally.longest.max(started.elapsed());
                    match result {
                        Ok(d) if d.allowed => {
                            tally.allowed += 1;
                            tally.admitted[key].push((sent, wall_us()));
                        }
                        Ok(_) => tally.denied += 1,
                        Err(e) => {
                            *tally.errors.entry(kind(&e)).or_default() += 1;
                            // Redis is away: don't spin on fast failures.
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                }
                tally
            })
        })
        .collect();

    let started = Instant::now();
    let mut restarts = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        // Half a window after the whole second: the keys' admissions come in
        // bursts as the window slides past the previous burst (at whole
        // seconds from the start), so mid-window every log is full and a
        // restart that loses it is certain to let a second burst in early.
        let next = (Duration::from_secs(restart_every * (restarts + 1)) + Duration::from_micros(WINDOW_US / 2))
            .min(Duration::from_secs(seconds));
        tokio::time::sleep(next.saturating_sub(started.elapsed())).await;
        if started.elapsed() + Duration::from_millis(100) < Duration::from_secs(seconds) {
            let down = Instant::now();
            tokio::task::block_in_place(|| server.restart());
            restarts += 1;
            println!("{:>6.1}s  restarted Redis (down {:?})", started.elapsed().as_secs_f64(), down.elapsed());
        }
    }
    stop.store(true, Ordering::Relaxed);

    let mut total = Tally { admitted: vec![Vec::new(); KEYS], ..Tally::default() };
    for worker in workers {
        let t = worker.await.expect("worker panicked");
        total.allowed += t.allowed;
        total.denied += t.denied;
        for (k, n) in t.errors {
            *total.errors.entry(k).or_default() += n;
        }
        total.longest = total.longest.max(t.longest);
        for (key, calls) in t.admitted.into_iter().enumerate() {
            total.admitted[key].extend(calls);
        }
    }
    let over: usize = total.admitted.into_iter().map(over_admissions).sum();
    let decisions = total.allowed + total.denied;
    println!("soak: {seconds} s, {restarts} restarts, policy sliding_log {LIMIT}/1s on {KEYS} keys, {TASKS} tasks");
    println!(
        "decisions        {decisions} ({:.0}/s): {} allowed, {} denied",
        decisions as f64 / seconds as f64,
        total.allowed,
        total.denied
    );
    println!("errors           {}", total.errors.values().sum::<u64>());
    for (kind, n) in &total.errors {
        println!("  {kind:<28}{n}");
    }
    println!("over-admissions  {over}");
    println!("longest call     {:?}", total.longest);
    // Returned, not process::exit: the private Redis must be dropped (killed).
    if over > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
