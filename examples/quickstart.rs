//! Quickstart: one attribute limits an async function; 30 concurrent calls
//! against "5 per 3 s" let exactly 5 through, and 3 s later 5 more pass.
//!
//! Run it with nothing installed (decisions in memory, in this process):
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! or on Redis, shared by every process that uses the same server:
//!
//! ```text
//! REDLIMIT_REDIS_URL=redis://127.0.0.1:6379 cargo run --example quickstart
//! ```
//!
//! It prints one row per round (calls, passed, denied, what a denial says),
//! then a two-strategy policy (`2/1s,3/1m`) denying a call and naming the
//! strategy it broke. It runs in about 4 seconds.

use redlimit::{rate_limit, Limiter, Policy, RateLimited};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// 5 calls per user in any 3 seconds, decided exactly (a sliding log).
#[rate_limit(algo = "sliding_log", strategies = "5/3s", key = "user:<user_id>", name = "quickstart.profile")]
async fn get_profile(user_id: u64) -> Result<String, RateLimited> {
    Ok(format!("profile of user {user_id}"))
}

/// Two rules at once: 2 per second and 3 per minute.
#[rate_limit(algo = "sliding_log", strategies = "2/1s,3/1m", key = "<query>", name = "quickstart.search")]
async fn search(query: &str) -> Result<usize, RateLimited> {
    Ok(query.len())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();

    // Build the global store from REDLIMIT_REDIS_URL (memory when unset) at
    // start-up: a wrong URL, nothing listening or a wrong password stops the
    // program here. (Without it the first limited call would build it, and
    // only log such a failure while `on_error` settled every call.)
    let store = redlimit::init_from_env().await?;
    println!("store: {}", store.kind());
    Limiter::new("quickstart.profile", Policy::sliding_log("5/3s")?, store).reset("user:42").await?;
    Limiter::new("quickstart.search", Policy::sliding_log("2/1s,3/1m")?, store).reset("rust").await?;

    println!("\nget_profile(42) is limited to 5 calls per 3 s (sliding_log 5/3s)\n");
    println!("{:>6}  {:>5}  {:>6}  {:>6}  first denial", "time", "calls", "passed", "denied");
    let start = Instant::now();
    round(start, 30).await;
    let first_round_done = Instant::now();

    // Meanwhile: one denial by a two-strategy policy names the rule it broke.
    let mut lines = Vec::new();
    for n in 1..=3 {
        lines.push(format!("   search(\"rust\") #{n}: {}", describe(search("rust").await)));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for n in 4..=5 {
        lines.push(format!("1s later, call #{n}: {}", describe(search("rust").await)));
    }

    // 3 s after the first round, its 5 hits have left the window.
    tokio::time::sleep_until((first_round_done + Duration::from_secs(3)).into()).await;
    round(start, 10).await;

    println!("\nsearch(query) is limited to 2 per second and 3 per minute (sliding_log 2/1s,3/1m)\n");
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// Runs `calls` concurrent calls and prints one row.
async fn round(start: Instant, calls: usize) {
    let at = start.elapsed();
    let mut set = JoinSet::new();
    for _ in 0..calls {
        set.spawn(get_profile(42));
    }
    let (mut passed, mut denials) = (0, Vec::new());
    while let Some(result) = set.join_next().await {
        match result.expect("a call panicked") {
            Ok(_) => passed += 1,
            Err(denied) => denials.push(denied),
        }
    }
    let first = denials.first().map(ToString::to_string).unwrap_or_default();
    println!("{:>5.1}s  {calls:>5}  {passed:>6}  {:>6}  {first}", at.as_secs_f64(), denials.len());
}

fn describe(result: Result<usize, RateLimited>) -> String {
    match result {
        Ok(_) => "passed".into(),
        Err(denied) => format!(
            "denied, violated {:?}: {denied}",
            denied.decision().violated.iter().map(ToString::to_string).collect::<Vec<_>>()
        ),
    }
}
