#![cfg(feature = "redis")]
//! The global store's Redis accepts connections and never answers: no
//! annotated call waits for it longer than the response timeout (250 ms);
//! `on_error` settles each, while the store keeps trying to connect in the
//! background. One test, because the environment is process-wide.

use redlimit::{rate_limit, RateLimited};
use redlimit_test_support::silent_listener::SilentListener;
use std::time::{Duration, Instant};

#[rate_limit(algo = "fixed_window", strategies = "1000/1h")]
async fn allow() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", strategies = "1000/1h", on_error = "deny")]
async fn deny() -> Result<(), RateLimited> {
    Ok(())
}

const TASKS: usize = 8;
/// Calls per task, a pause apart: together longer than several connect
/// attempts (1 s each against this listener), so calls meet every phase.
const CALLS: usize = 15;
const PAUSE: Duration = Duration::from_millis(200);
/// The 250 ms the global store waits for a connection, and scheduling slack.
const BOUND: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_settled_by_on_error_within_the_response_timeout_while_redis_never_answers() {
    let silent = SilentListener::start();
    std::env::set_var(redlimit::REDIS_URL_VAR, silent.url());
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            tokio::spawn(async move {
                let mut longest = Duration::ZERO;
                for _ in 0..CALLS {
                    let started = Instant::now();
                    allow().await.expect("on_error = allow lets the call through");
                    let refused = deny().await.expect_err("on_error = deny refuses the call");
                    assert_eq!(refused.reason(), redlimit::DenialReason::StoreUnavailable, "{refused}");
                    longest = longest.max(started.elapsed());
                    tokio::time::sleep(PAUSE).await;
                }
                longest
            })
        })
        .collect();
    let mut longest = Duration::ZERO;
    for task in tasks {
        longest = longest.max(task.await.expect("no task panicked"));
    }
    println!("longest pair of calls {longest:?}; {} connects accepted", silent.accepted());
    // Two calls, each waiting at most the response timeout.
    assert!(longest < 2 * BOUND, "a pair of calls took {longest:?}");
    // The connect was tried again in the background, not once per call.
    let accepted = silent.accepted();
    assert!(accepted >= 2, "{accepted} connects");
    assert!(accepted < TASKS * CALLS, "{accepted} connects for {} calls", 2 * TASKS * CALLS);
}
