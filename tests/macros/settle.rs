//! `#[rate_limit(cost = estimate, settle = path)]`: the call reserves its
//! estimate, and the function's result settles it at the actual cost, on
//! both stores: the rest comes back, an overage is owed past the limit, an
//! `Err` the function reads as 0 gives it all back.

use redlimit::{rate_limit, Limiter, Policy, RateLimited};
use redlimit_test_support::stores::BothStores;

#[derive(Debug)]
struct Completion {
    tokens: u64,
}

#[derive(Debug)]
enum GatewayError {
    Limited,
    Upstream,
}

impl From<RateLimited> for GatewayError {
    fn from(_: RateLimited) -> Self {
        GatewayError::Limited
    }
}

fn tokens_used(result: &Result<Completion, GatewayError>) -> u64 {
    result.as_ref().map_or(0, |completion| completion.tokens)
}

#[rate_limit(
    name = "macro.settle.tokens",
    algo = "token_bucket",
    capacity = 1000,
    rate = "1000/1m",
    key = "<api_key>",
    cost = estimate,
    settle = tokens_used
)]
async fn complete(api_key: &str, estimate: u64, used: Option<u64>) -> Result<Completion, GatewayError> {
    match used {
        Some(tokens) => Ok(Completion { tokens }),
        None => Err(GatewayError::Upstream),
    }
}

fn bytes(result: &Result<Vec<u8>, RateLimited>) -> u64 {
    result.as_ref().map_or(0, |body| body.len() as u64)
}

#[rate_limit(name = "macro.settle.bytes", algo = "fixed_window", strategies = "100/1h", cost = 10, settle = bytes)]
async fn download(size: usize) -> Result<Vec<u8>, RateLimited> {
    Ok(vec![0; size])
}

#[tokio::test]
async fn a_site_settles_its_estimate_at_what_the_result_says_on_both_stores() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let tokens = Limiter::new("macro.settle.tokens", Policy::token_bucket(1000, "1000/1m").unwrap(), store);
        let left = || async { tokens.peek("alice", 0).await.unwrap() };
        redlimit::scope(store.clone(), async {
            complete("alice", 300, Some(120)).await.unwrap();
            assert_eq!(left().await.remaining, 880, "{at}: 180 of 300 back");
            complete("alice", 100, None).await.unwrap_err();
            assert_eq!(left().await.remaining, 880, "{at}: an upstream failure read as 0: all back");
            complete("alice", 0, Some(30)).await.unwrap();
            assert_eq!(left().await.remaining, 850, "{at}: an estimate of 0, charged");
            complete("alice", 30, Some(0)).await.unwrap();
            assert_eq!(left().await.remaining, 850, "{at}: all back");
            complete("alice", 800, Some(1500)).await.unwrap();
            let owed = left().await;
            assert_eq!((owed.allowed, owed.remaining), (false, 0), "{at}: 620 owed past the limit");
            assert!(matches!(complete("alice", 1, Some(1)).await, Err(GatewayError::Limited)), "{at}");
            assert_eq!(tokens.peek("bob", 0).await.unwrap().remaining, 1000, "{at}: keys apart");

            let window = Limiter::new("macro.settle.bytes", Policy::fixed_window("100/1h").unwrap(), store);
            for _ in 0..3 {
                download(30).await.unwrap();
            }
            assert_eq!(window.peek("", 0).await.unwrap().remaining, 10, "{at}: 3 × 30 counted, not 3 × 10");
            download(45).await.unwrap();
            assert!(download(1).await.is_err(), "{at}: 135 of 100");
        })
        .await;
    }
}
