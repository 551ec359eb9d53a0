//! Traffic shaping: a leaky bucket with `on_limit = "wait"` turns a burst of
//! 20 concurrent calls into a steady rate. Nothing is refused: each call
//! that would overflow the bucket sleeps until it fits, then runs.
//!
//! ```text
//! cargo run --example shaping
//! REDLIMIT_REDIS_URL=redis://127.0.0.1:6379 cargo run --example shaping
//! ```
//!
//! It prints each call's start time and a timeline: 3 calls start at once
//! (the bucket's capacity), then one every 100 ms (its drain rate, 10/1s),
//! so the 20th starts about 1.7 s after the first.

use redlimit::{rate_limit, Limiter, Policy};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// At most 3 calls in the bucket, draining 10 per second. No `max_wait` and
/// a fixed cost: a call always gets through eventually, so the function
/// needs no `Result`.
#[rate_limit(algo = "leaky_bucket", capacity = 3, rate = "10/1s", on_limit = "wait", name = "shaping.send")]
async fn send(message: usize, start: Instant) -> (usize, Duration) {
    (message, start.elapsed())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Builds the global store from REDLIMIT_REDIS_URL (memory when unset); a wrong URL stops here.
    let store = redlimit::init_from_env().await?;
    // Start with an empty bucket even if a previous run just filled it on Redis.
    Limiter::new("shaping.send", Policy::leaky_bucket(3, "10/1s")?, store).reset("").await?;
    println!("store: {}; leaky bucket: capacity 3, drains 10/1s; 20 calls at once\n", store.kind());

    let start = Instant::now();
    let mut calls = JoinSet::new();
    for message in 1..=20 {
        calls.spawn(send(message, start));
    }
    let mut started = Vec::new();
    while let Some(call) = calls.join_next().await {
        started.push(call?);
    }
    started.sort_by_key(|(_, at)| *at);

    let mut previous = Duration::ZERO;
    for (order, (message, at)) in started.iter().enumerate() {
        let gap = at.saturating_sub(previous);
        previous = *at;
        let column = (at.as_millis() / 50) as usize; // one column per 50 ms
        println!(
            "#{:>2} (message {message:>2}) started at {:>6.3}s  +{:>4}ms  |{}*",
            order + 1,
            at.as_secs_f64(),
            gap.as_millis(),
            " ".repeat(column)
        );
    }
    let span = started.last().map(|(_, at)| *at).unwrap_or_default();
    println!(
        "\n20 calls in {:.2}s: {:.1} calls/s after the first 3",
        span.as_secs_f64(),
        17.0 / span.as_secs_f64().max(0.001)
    );
    Ok(())
}
