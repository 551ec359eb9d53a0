//! A minute-long outage under load costs a bounded number of log lines, not
//! one per call: the first failure at WARN at once, then one line per 10 s
//! counting the calls settled meanwhile, and the recovery once. Time is a
//! manual clock: thousands of calls spread over 60 s of it, no real wait.
//!
//! `cargo test --test outage logging::`

use redlimit::{Limiter, ManualClock, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::RedisServer;
use std::time::Duration;

const CALLS: u64 = 6_000;
const OUTAGE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "current_thread")]
async fn a_minute_long_outage_under_load_is_a_handful_of_lines() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let mut server = RedisServer::start();
    let clock = ManualClock::new();
    let options = RedisOptions::default().with_response_timeout(Duration::from_millis(100));
    let store = Store::redis_with(&server.url(), options).await.unwrap().with_clock(clock.clone());
    let allow = Limiter::new("outage.allow", Policy::fixed_window("1000000/1h").unwrap(), &store);
    let local =
        Limiter::new("outage.local", Policy::fixed_window("1000000/1h").unwrap(), &store).with_on_error(OnError::Local);
    allow.limit("k", 1).await.unwrap();
    local.limit("k", 1).await.unwrap();

    server.kill();
    let step = OUTAGE / CALLS as u32;
    for _ in 0..CALLS {
        allow.limit("k", 1).await.expect("on_error = allow");
        local.limit("k", 1).await.expect("on_error = local: well within the limit in memory");
        clock.advance(step);
    }
    assert_eq!(allow.store_errors(), CALLS);
    assert_eq!(local.store_errors(), CALLS);

    server.restart();
    let mut tries = 0;
    for limiter in [&allow, &local] {
        loop {
            let before = limiter.store_errors();
            limiter.limit("k", 1).await.unwrap();
            if limiter.store_errors() == before {
                break;
            }
            tries += 1;
            assert!(tries < 200, "Redis did not answer again after {tries} calls 50 ms apart");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let text = logs.text();
    for name in ["outage.allow", "outage.local"] {
        let lines: Vec<&str> = text.lines().filter(|line| line.contains(&format!("limiter=\"{name}\""))).collect();
        println!("{}", lines.join("\n"));
        let warnings = lines.iter().filter(|line| line.contains(" WARN ")).count();
        // The first failure, then one line at each of 10, 20, 30, 40 and 50 s
        // (and at 60 s if a call failed while Redis came back).
        assert!((6..=7).contains(&warnings), "{name}: {warnings} lines for {CALLS} calls over {OUTAGE:?}:\n{text}");
        let ongoing = lines.iter().filter(|line| line.contains("1000 calls settled by on_error")).count();
        assert_eq!(ongoing, warnings - 1, "each line after the first counts the calls of its 10 s: {text}");
        let recovered = lines.iter().filter(|line| line.contains("rate limit store answers again after")).count();
        assert_eq!(recovered, 1, "the recovery, once: {text}");
    }
    assert!(text.contains("call allowed (on_error = allow)"), "{text}");
    assert!(text.contains("call allowed by the in-memory limiter (on_error = local)"), "{text}");
    assert_eq!(text.matches("rate limit store answers again after 60s; 60").count(), 2, "{text}");
}
