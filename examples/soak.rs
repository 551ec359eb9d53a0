//! Soak: decisions at full speed against a private Redis that closes idle
//! clients after a second (`timeout 1`) and keeps its data (append-only
//! file, fsync always). Every 15 s (half a second past it) comes an event,
//! in turn: a kill (SIGKILL) and restart; an idle spell (every task pauses
//! 2.5 s, so Redis closes the connection); an outage (killed, down for a
//! second of refused connects, restarted).
//!
//! ```sh
//! cargo run --release --example soak                  # 60 s, an event every 15 s
//! cargo run --release --example soak -- --seconds 20 --restart-every 5
//! cargo run --release --example soak -- --forget      # restarts lose the data:
//!                                                     # over-admissions show up
//! ```
//!
//! Prints the events (with the reconnects each idle spell cost), decisions,
//! errors by kind, the errors in the second after each idle spell (0: Redis
//! was healthy), over-admissions and the longest call, and exits non-zero
//! on any over-admission or on an error after an idle spell. An over-admission is counted
//! only when it is certain: `limit + 1` admitted calls of one key whose
//! whole send-to-answer spans fit inside one window (Redis reads the same
//! wall clock as this process, on this machine).

use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LIMIT: usize = 50;
const WINDOW_US: u64 = 1_000_000;
const KEYS: usize = 8;
const TASKS: usize = 32;
/// Longer than the server's idle `timeout` of one second.
const IDLE: Duration = Duration::from_millis(2500);
const OUTAGE: Duration = Duration::from_secs(1);

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
        // The message carries the operating system's words for a refused connect.
        Error::Connection(_) if error.to_string().to_lowercase().contains("refused") => "connection refused",
        Error::Connection(_) => "connection lost",
        Error::Auth(_) => "credentials refused",
        Error::Server(_) => "redis error",
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
    let aof: &[&str] =
        if flag("--forget") { &["--appendonly", "no"] } else { &["--appendonly", "yes", "--appendfsync", "always"] };
    let mut server = RedisServer::start_on(free_port, &[aof, &["--timeout", "1"]].concat(), None);
    let store = Store::redis_with(&server.url(), RedisOptions::default()).await.expect("connect to the private Redis");
    // Every decision goes to Redis: the deny cache would answer denials in
    // process and bunch admissions into bursts that hide lost state.
    let limiter =
        Limiter::new("soak", Policy::sliding_log(&format!("{LIMIT}/1s")).unwrap(), &store).with_deny_cache(false);
    let stop = Arc::new(AtomicBool::new(false));
    // While set, every task pauses; errors counts every failed call.
    let (paused, errors) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));

    let workers: Vec<_> = (0..TASKS)
        .map(|task| {
            let (limiter, stop, paused, errors) = (limiter.clone(), stop.clone(), paused.clone(), errors.clone());
            tokio::spawn(async move {
                let mut tally = Tally { admitted: vec![Vec::new(); KEYS], ..Tally::default() };
                let mut i = task;
                while !stop.load(Ordering::Relaxed) {
                    if paused.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
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
                            errors.fetch_add(1, Ordering::Relaxed);
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
    let mut events = 0;
    let (mut restarts, mut idle_spells, mut outages, mut idle_reconnects, mut errors_after_idle) = (0, 0, 0, 0, 0);
    while started.elapsed() < Duration::from_secs(seconds) {
        // Half a window after the whole second: the keys' admissions come in
        // bursts as the window slides past the previous burst (at whole
        // seconds from the start), so mid-window every log is full and a
        // restart that loses it is certain to let a second burst in early.
        let next = (Duration::from_secs(restart_every * (events + 1)) + Duration::from_micros(WINDOW_US / 2))
            .min(Duration::from_secs(seconds));
        tokio::time::sleep(next.saturating_sub(started.elapsed())).await;
        if started.elapsed() + IDLE + Duration::from_secs(2) >= Duration::from_secs(seconds) {
            // No room left for an event and its aftermath: run out the time.
            tokio::time::sleep(Duration::from_secs(seconds).saturating_sub(started.elapsed())).await;
            break;
        }
        let at = started.elapsed().as_secs_f64();
        match events % 3 {
            0 => {
                let down = Instant::now();
                tokio::task::block_in_place(|| server.restart());
                restarts += 1;
                println!("{at:>6.1}s  killed and restarted Redis (down {:?})", down.elapsed());
            }
            1 => {
                paused.store(true, Ordering::Relaxed);
                tokio::time::sleep(IDLE).await;
                let (connections, errors_before) = (server.connections_received(), errors.load(Ordering::Relaxed));
                paused.store(false, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(1)).await;
                let reconnects = server.connections_received() - connections;
                let failed = errors.load(Ordering::Relaxed) - errors_before;
                (idle_spells, idle_reconnects, errors_after_idle) =
                    (idle_spells + 1, idle_reconnects + reconnects, errors_after_idle + failed);
                println!("{at:>6.1}s  idle {IDLE:?}: Redis closed the client; {reconnects} reconnects, {failed} errors in the next second");
            }
            _ => {
                tokio::task::block_in_place(|| server.kill());
                tokio::time::sleep(OUTAGE).await;
                tokio::task::block_in_place(|| server.restart());
                outages += 1;
                println!("{at:>6.1}s  Redis down {OUTAGE:?} (refused connects), restarted");
            }
        }
        events += 1;
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
    println!("soak: {seconds} s, policy sliding_log {LIMIT}/1s on {KEYS} keys, {TASKS} tasks");
    println!(
        "events           {restarts} kills and restarts, {outages} outages, {idle_spells} idle disconnects ({idle_reconnects} reconnects)"
    );
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
    println!("errors after idle  {errors_after_idle}");
    println!("over-admissions  {over}");
    println!("longest call     {:?}", total.longest);
    // Returned, not process::exit: the private Redis must be dropped (killed).
    if over > 0 || errors_after_idle > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
