//! On Redis's clock a bucket's or gcra's write in the second its key's TTL
//! already runs to overwrites the state in place (`SETRANGE key 0 state`),
//! which is only whole when the state it replaces is as long. gcra's state
//! is 24 bytes for a TAT in whole µs and 32 with a remainder, so a rate
//! that does not reduce to n = 1 switches between them from write to
//! write: every state read back must still be one of the two, written
//! under the policy's rate.

use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;

fn doubles(bytes: &[u8]) -> Vec<f64> {
    bytes.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
}

#[tokio::test]
async fn a_state_of_another_length_is_written_whole() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let mut con = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    // 7 per 30 ms: n = 7 units per p = 30 000 µs, one permit 30 000 units,
    // which 7 does not divide, so each write moves the remainder (and a
    // first cost of 20 keeps the TAT ahead of the calls that follow).
    let limiter = Limiter::new("in-place", Policy::gcra("7/30ms", 40).unwrap(), &store).with_deny_cache(false);
    let mut lengths = Vec::new();
    for (i, cost) in [20u64].into_iter().chain([1; 12]).enumerate() {
        let decision = limiter.check("k", cost).await.unwrap();
        assert!(decision.allowed, "call {i} of cost {cost}: denied");
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query_async(&mut con).await.unwrap();
        let state: Vec<u8> = redis::cmd("GET").arg(&keys[0]).query_async(&mut con).await.unwrap();
        let read = doubles(&state);
        match read[..] {
            [_, n, p] => assert_eq!((n, p), (7.0, 30_000.0), "call {i}: {read:?}"),
            [_, rem, n, p] => {
                assert_eq!((n, p), (7.0, 30_000.0), "call {i}: {read:?}");
                assert!(rem > 0.0 && rem < 7.0, "call {i}: remainder {rem}");
            }
            _ => panic!("call {i}: a state of {} bytes", state.len()),
        }
        lengths.push(state.len());
    }
    assert!(lengths.iter().all(|&l| l == 24 || l == 32), "{lengths:?}");
}
