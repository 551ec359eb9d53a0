//! With the server clock, gcra.lua, token_bucket.lua and leaky_bucket.lua
//! set a key's TTL only when its reset moves into a new second (to that
//! second's end) and otherwise keep it (`SETRANGE key 0 state`).
//! Whatever they do, a key must outlive its reset and live at most about
//! 1 s past it.

use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::time::Instant;

#[tokio::test]
async fn a_key_outlives_its_reset_by_less_than_a_second() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let mut con = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    // 7 per 3 s does not reduce to n = 1: TATs with a remainder (gcra's 17-byte state).
    let policies = [
        Policy::gcra("100/1s", 40).unwrap(),
        Policy::gcra("7/3s", 5).unwrap(),
        Policy::token_bucket(40, "100/1s").unwrap(),
        Policy::token_bucket(6, "7/3s").unwrap(),
        Policy::leaky_bucket(40, "100/1s").unwrap(),
        Policy::leaky_bucket(6, "7/3s").unwrap(),
    ];
    for policy in policies {
        let limiter = Limiter::new("ttl", policy.clone(), &store).with_deny_cache(false);
        let mut written = 0;
        for i in 0..300u64 {
            let cost = i % 3;
            let decision = limiter.check("k", cost).await.unwrap();
            let decided = Instant::now();
            if !decision.allowed || cost == 0 {
                continue;
            }
            written += 1;
            let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut con).await.unwrap();
            let pttl: i64 = redis::cmd("PTTL").arg(&keys[0]).query_async(&mut con).await.unwrap();
            let since_ms = decided.elapsed().as_millis() as i64;
            let reset_ms = decision.reset_after.as_micros().div_ceil(1000) as i64;
            // Redis keeps expiry in ms: allow the 1 ms it may round by.
            assert!(
                pttl + since_ms + 1 >= reset_ms,
                "{policy}, call {i}: TTL {pttl} ms shorter than the reset {reset_ms} ms"
            );
            assert!(
                pttl <= reset_ms + 1_001,
                "{policy}, call {i}: TTL {pttl} ms more than 1 s past the reset {reset_ms} ms"
            );
        }
        assert!(written >= 4, "{policy}: only {written} writes");
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut con).await.unwrap();
        let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut con).await.unwrap();
    }
}
