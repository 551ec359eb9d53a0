//! The bucket scripts (token_bucket, leaky_bucket, gcra) answer
//! with one number and the time they decided at (`lua/set_state.lua`), and
//! the runtime rebuilds the decision from them. The time must be Redis's
//! own: `Decision::decided_at` promises it, and the exactness check replays
//! it. Every other field is pinned against the memory twin by limiter/parity.rs.

use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::time::UNIX_EPOCH;

/// The only key on the server and its state's bytes.
async fn only_state(con: &mut redis::aio::MultiplexedConnection) -> (String, Vec<u8>) {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(con).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bytes: Vec<u8> = redis::cmd("GET").arg(&keys[0]).query_async(con).await.unwrap();
    (keys[0].clone(), bytes)
}

#[tokio::test]
async fn on_the_server_clock_a_decision_is_dated_by_redis_time_to_the_microsecond() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let mut con = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    // A fresh key's first admitted call writes the script's `now` into its
    // state: gcra's TAT is now + p µs (n = 1), a bucket's last time is now.
    let policies = [
        (Policy::gcra("1000/1s", 4).unwrap(), 1000.0),
        (Policy::token_bucket(5, "1/1s").unwrap(), 0.0),
        (Policy::leaky_bucket(5, "1/1s").unwrap(), 0.0),
    ];
    for (policy, after_now) in policies {
        let limiter = Limiter::new("dated", policy.clone(), &store).with_deny_cache(false);
        let decision = limiter.check("k", 1).await.unwrap();
        assert!(decision.allowed, "{policy}");
        let (key, state) = only_state(&mut con).await;
        let written = match state.len() {
            24 => f64::from_le_bytes(state[..8].try_into().unwrap()),
            33 => f64::from_le_bytes(state[8..16].try_into().unwrap()),
            other => panic!("{policy}: a state of {other} bytes"),
        };
        let decided_us = decision.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as f64;
        assert_eq!(decided_us, written - after_now, "{policy}: decided_at is not the script's TIME");
        // A denial writes nothing, and is dated by Redis too: not before the admission.
        for _ in 0..5 {
            let later = limiter.check("k", 1).await.unwrap();
            assert!(later.decided_at >= decision.decided_at, "{policy}");
        }
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut con).await.unwrap();
    }
}
