//! `algo` and its parameters: each algorithm admits what its policy says, and
//! the emitted constant is exactly the policy the runtime builder makes
//! (defaults included).

use super::{denied, on_global_store};
use redlimit::{rate_limit, Policy, RateLimited};
use std::time::Duration;

#[rate_limit(algo = "fixed_window", strategies = "3/1h")]
async fn fixed() -> Result<(), RateLimited> {
    Ok(())
}
#[rate_limit(algo = "sliding_window", strategies = "3/1h", precision = "1m")]
async fn sliding() -> Result<(), RateLimited> {
    Ok(())
}
#[rate_limit(algo = "sliding_log", strategies = "3/1h")]
async fn log() -> Result<(), RateLimited> {
    Ok(())
}
#[rate_limit(algo = "token_bucket", capacity = 3, rate = "1/1h")]
async fn token() -> Result<(), RateLimited> {
    Ok(())
}
#[rate_limit(algo = "leaky_bucket", capacity = 3, rate = "1/1h")]
async fn leaky() -> Result<(), RateLimited> {
    Ok(())
}
#[rate_limit(algo = "gcra", rate = "1/1h", burst = 2)]
async fn gcra() -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn every_algorithm_admits_its_limit() {
    on_global_store(async {
        macro_rules! three_then_denied {
            ($f:ident, $policy:expr) => {
                for i in 0..3 {
                    assert!($f().await.is_ok(), "{}: call {i}", stringify!($f));
                }
                let d = denied($f().await);
                assert_eq!(d.decision().limit, 3, "{}", stringify!($f));
                assert_eq!(d.decision().remaining, 0, "{}", stringify!($f));
                let retry = d.retry_after().expect("can pass later");
                // On Redis's clock a one-strategy fixed window is a counter
                // whose TTL Redis rounds by up to 1 ms (`fixed_window_counter.lua`
                // answers PTTL + 1): a denial in the window's first ms says
                // 3600.001 s, and only a fast machine gets there that soon.
                let longest = Duration::from_secs(3600) + Duration::from_millis(1);
                assert!(retry > Duration::ZERO && retry <= longest, "{}: {retry:?}", stringify!($f));
                assert_eq!(d.policy(), Some(&$policy.unwrap()), "{}", stringify!($f));
            };
        }
        three_then_denied!(fixed, Policy::fixed_window("3/1h"));
        three_then_denied!(sliding, Policy::sliding_window("3/1h", "1m"));
        three_then_denied!(log, Policy::sliding_log("3/1h"));
        three_then_denied!(token, Policy::token_bucket(3, "1/1h"));
        three_then_denied!(leaky, Policy::leaky_bucket(3, "1/1h"));
        three_then_denied!(gcra, Policy::gcra("1/1h", 2));
    });
}

#[rate_limit(algo = "sliding_window", strategies = "1/1s,1/1m")]
async fn default_precision() -> Result<(), RateLimited> {
    Ok(())
}
#[rate_limit(algo = "gcra", rate = "2/1h")]
async fn default_burst() -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn defaults_match_the_runtime_builder() {
    on_global_store(async {
        default_precision().await.unwrap();
        // Precision defaults to a tenth of the windows' gcd, as `Policy` documents.
        assert_eq!(
            denied(default_precision().await).policy().unwrap().to_string(),
            "sliding_window 1/1s,1/1m precision 100ms"
        );
        // Burst defaults to count - 1: `rate = "2/1h"` admits two at once.
        default_burst().await.unwrap();
        default_burst().await.unwrap();
        assert_eq!(denied(default_burst().await).policy(), Some(&Policy::gcra("2/1h", 1).unwrap()));
    });
}

#[rate_limit(algo = "fixed_window", strategies = "5/1h,2/1d", name = "algo.multi")]
async fn multi() -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn multi_strategy_denial_names_the_violated_strategy() {
    on_global_store(async {
        multi().await.unwrap();
        multi().await.unwrap();
        let d = denied(multi().await);
        assert_eq!(d.decision().violated.iter().map(ToString::to_string).collect::<Vec<_>>(), ["2/1d"]);
        let message = d.to_string();
        assert!(message.starts_with("rate limited by `algo.multi` (2/1d exceeded); retry after"), "{message}");
    });
}
