//! Every call is answered within its response timeout, the first included:
//! the first call of a family of algorithm on a store loads its script, and
//! that load and the call share the call's one deadline. The server is
//! frozen (SIGSTOP) once connected, so a load that had a timeout of its own
//! would make the first call take two timeouts.

use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::process::Command;
use std::time::{Duration, Instant};

/// Long enough that a second timeout is far past the margin below.
const TIMEOUT: Duration = Duration::from_secs(1);

/// A frozen server's call fails once its one timeout has passed; the margin
/// is scheduling on a busy machine, well under a second timeout.
const MARGIN: Duration = Duration::from_millis(600);

/// `policy`'s first call on `store` under a fresh limiter: its result and how long it took.
async fn first_call(store: &Store, name: &str, policy: Policy) -> (Result<redlimit::Decision, Error>, Duration) {
    let limiter = Limiter::new(name, policy, store);
    let started = Instant::now();
    let result = limiter.check("k", 1).await;
    (result, started.elapsed())
}

fn signal(server: &RedisServer, signal: &str) {
    let pid = server.pid().unwrap().to_string();
    assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
}

#[tokio::test]
async fn a_first_call_on_a_frozen_server_fails_within_one_response_timeout() {
    let server = RedisServer::start();
    let options = RedisOptions::default().with_response_timeout(TIMEOUT);
    let batched = Store::redis_with(&server.url(), options.clone()).await.unwrap();
    let alone = Store::redis_with(&server.url(), options.clone().with_batching(false)).await.unwrap();
    let used = Store::redis_with(&server.url(), options).await.unwrap();
    // A store already deciding one family: a new limiter's first call of another loads its script.
    assert!(first_call(&used, "warm", Policy::gcra("1/1s", 5).unwrap()).await.0.unwrap().allowed);
    signal(&server, "-STOP");
    let window = || Policy::fixed_window("5/1s").unwrap();
    let (fresh, unbatched, new_family) = tokio::join!(
        first_call(&batched, "fresh", window()),
        first_call(&alone, "unbatched", window()),
        first_call(&used, "new-family", window()),
    );
    signal(&server, "-CONT");
    for (what, (result, took)) in [("a fresh store", fresh), ("unbatched", unbatched), ("a new family", new_family)] {
        assert!(matches!(result, Err(Error::Timeout(_))), "{what}: {result:?}");
        assert!(took < TIMEOUT + MARGIN, "{what}: took {took:?} for a response timeout of {TIMEOUT:?}");
    }
}
