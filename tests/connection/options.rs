//! `RedisOptions`: no duration panics or silently turns a safeguard off.
//! Every value either connects or is refused with an error naming the field.

use proptest::prelude::*;
use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::sync::OnceLock;
use std::time::Duration;

fn server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap())
}

/// Any duration, with the edges and the bounds' neighbours often.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(RedisOptions::MIN_DURATION),
        Just(RedisOptions::MAX_DURATION),
        Just(RedisOptions::MAX_DURATION + Duration::from_nanos(1)),
        Just(RedisOptions::MAX_RETRY_INTERVAL),
        Just(RedisOptions::MAX_RETRY_INTERVAL + Duration::from_nanos(1)),
        Just(RedisOptions::MIN_DURATION - Duration::from_nanos(1)),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (0u64..5_000_000_000).prop_map(Duration::from_nanos),
    ]
}

fn in_bounds(d: Duration) -> bool {
    (RedisOptions::MIN_DURATION..=RedisOptions::MAX_DURATION).contains(&d)
}

fn retry_interval_in_bounds(d: Duration) -> bool {
    (RedisOptions::MIN_DURATION..=RedisOptions::MAX_RETRY_INTERVAL).contains(&d)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_duration_connects_or_is_refused_by_name(
        connect_timeout in duration(),
        response_timeout in duration(),
        retry_interval in duration(),
        reconnect_retries in prop_oneof![Just(usize::MAX), 0usize..200],
    ) {
        let options = RedisOptions::default().with_connect_timeout(connect_timeout).with_response_timeout(response_timeout).with_retry_interval(retry_interval).with_reconnect_retries(reconnect_retries);
        let result = runtime().block_on(Store::redis_with(&server().url(), options));
        let wrong = [
            ("connect_timeout", !in_bounds(connect_timeout)),
            ("response_timeout", !in_bounds(response_timeout)),
            ("retry_interval", !retry_interval_in_bounds(retry_interval)),
            ("reconnect_retries", reconnect_retries > RedisOptions::MAX_RECONNECT_RETRIES),
        ];
        match wrong.iter().find(|(_, wrong)| *wrong) {
            Some((field, _)) => {
                let error = result.unwrap_err();
                prop_assert!(matches!(error, Error::InvalidConfig(_)), "{error:?}");
                prop_assert!(error.to_string().contains(&format!("`{field}`")), "{error}");
            }
            None => match result {
                // A connect timeout of a few ms may be too short for a busy machine: a clear error.
                Err(error) => prop_assert!(error.to_string().contains("cannot connect to Redis"), "{error}"),
                Ok(store) => {
                    let limiter = Limiter::new("options", Policy::fixed_window("5/1h").unwrap(), &store);
                    // Decided, or a timeout when the response timeout is a few ms: never a panic.
                    let _ = runtime().block_on(limiter.check("k", 1));
                }
            },
        }
    }
}

/// The longest retry interval still opens the breaker: a frozen server's
/// timeout is followed by fast failures, not by another wait.
#[tokio::test]
async fn the_longest_retry_interval_keeps_the_breaker() {
    let server = RedisServer::start();
    let options = RedisOptions::default()
        .with_response_timeout(Duration::from_millis(200))
        .with_retry_interval(RedisOptions::MAX_RETRY_INTERVAL);
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let limiter = Limiter::new("longest-interval", Policy::fixed_window("5/1h").unwrap(), &store);
    limiter.check("k", 1).await.unwrap();
    let pid = server.pid().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let timed_out = limiter.check("k", 1).await;
    let fast = limiter.check("k", 1).await;
    std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap();
    assert!(matches!(timed_out, Err(Error::Timeout(_))), "{timed_out:?}");
    assert!(matches!(fast, Err(Error::Unavailable(_))), "the breaker is open: {fast:?}");
}
