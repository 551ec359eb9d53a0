//! The runtime API without the macro: build a [`Limiter`] from a name, a
//! [`Policy`] and a [`Store`], then `check`, `peek`, `limit`, `wait` and
//! `reset` keys by hand (for code that decides per request what to limit).
//!
//! ```text
//! cargo run --example manual_limiter
//! REDLIMIT_REDIS_URL=redis://127.0.0.1:6379 cargo run --example manual_limiter
//! ```
//!
//! It prints every `Decision` of a token bucket (capacity 3, one token back
//! every 500 ms): three calls pass, the fourth is refused with the exact
//! time to wait, `wait` sleeps that long and passes, and `reset` refills.

use redlimit::{Decision, Limiter, Policy, Store};
use std::time::Instant;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The store the environment chooses (Redis when REDLIMIT_REDIS_URL is
    // set, failing here if it cannot be used); `Store::memory()` or
    // `Store::redis(url).await?` work as well.
    let store: &Store = redlimit::init_from_env().await?;
    let limiter = Limiter::new("manual.uploads", Policy::token_bucket(3, "1/500ms")?, store);
    // Start from full buckets even if a previous run used them on Redis.
    limiter.reset("alice").await?;
    limiter.reset("bob").await?;
    println!("store: {}; policy: {}\n", store.kind(), limiter.policy());

    for n in 1..=4 {
        show(&format!("check #{n}"), &limiter.check("alice", 1).await?);
    }
    // `peek` answers without taking anything.
    show("peek", &limiter.peek("alice", 1).await?);
    // `limit` is `check` as a `Result`: the denial is an error you can `?`.
    match limiter.limit("alice", 1).await {
        Ok(_) => println!("limit: passed"),
        Err(denied) => println!("limit: Err({denied})"),
    }
    // Another key has its own bucket.
    show("check bob", &limiter.check("bob", 1).await?);

    // `wait` sleeps until `retry_after` and tries again (here for at most 2 s).
    let started = Instant::now();
    let decision = limiter.wait("alice", 1, Some(std::time::Duration::from_secs(2))).await?;
    println!("wait: passed after {:.3}s", started.elapsed().as_secs_f64());
    show("  that call", &decision);

    limiter.reset("alice").await?;
    show("after reset", &limiter.check("alice", 1).await?);
    Ok(())
}

fn show(what: &str, d: &Decision) {
    let verdict = if d.allowed { "allowed" } else { "DENIED " };
    let retry = d.retry_after.map(|r| format!(", retry after {r:?}")).unwrap_or_default();
    println!("{what:<12} {verdict} limit {} remaining {} reset after {:?}{retry}", d.limit, d.remaining, d.reset_after);
}
