//! Sentinel: a master, a replica and a sentinel on loopback. After
//! `SENTINEL FAILOVER` the old master answers writes with READONLY; the
//! limiter asks the sentinel again and carries on, with its state.

use redlimit::{Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::process::Command;
use std::time::{Duration, Instant};

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_follow_the_master_after_a_sentinel_failover() {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(
        redlimit_test_support::redis_server::free_port(),
        &["--appendonly", "no", "--replicaof", "127.0.0.1", &master.port().to_string()],
        None,
    );
    wait_for("the replica to sync", || cli(replica.port(), &["INFO", "replication"]).contains("master_link_status:up"));
    let sentinel = RedisServer::start_sentinel("redlimit-test", master.port());
    wait_for("the sentinel to see the replica", || {
        cli(sentinel.port(), &["SENTINEL", "REPLICAS", "redlimit-test"]).contains(&replica.port().to_string())
    });

    let options = RedisOptions::default().with_retry_interval(Duration::from_millis(50));
    let store = Store::redis_with(&format!("redis+sentinel://127.0.0.1:{}/redlimit-test", sentinel.port()), options)
        .await
        .unwrap();
    let limiter = Limiter::new("sentinel", Policy::fixed_window("5/1h").unwrap(), &store).with_deny_cache(false);
    for _ in 0..3 {
        assert!(limiter.check("k", 1).await.unwrap().allowed);
    }
    wait_for("the write to reach the replica", || cli(replica.port(), &["DBSIZE"]).trim() == "1");

    // The sentinel accepts a failover once it has talked to the replica itself.
    let mut answer = String::new();
    wait_for("the sentinel to accept SENTINEL FAILOVER", || {
        answer = cli(sentinel.port(), &["SENTINEL", "FAILOVER", "redlimit-test"]);
        answer.contains("OK")
    });
    wait_for("the old master to become a replica", || cli(master.port(), &["ROLE"]).starts_with("slave"));
    wait_for("the replica to become master", || cli(replica.port(), &["ROLE"]).starts_with("master"));

    // Sentinel kills the old master's clients when it demotes it: the first
    // call may fail with that dropped connection (it is not retried: a call
    // whose answer was lost may have run). The limiter has asked the
    // sentinel again, so the next call goes to the new master; had the
    // connection survived, the old master's READONLY would do the same.
    let first = limiter.check("k", 1).await;
    if let Err(e) = &first {
        assert!(e.is_unavailable(), "only a connection failure may surface: {e}");
        // Calls fail fast for `retry_interval` after a failure.
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let after = limiter.check("k", 1).await.expect("writes after the failover succeed");
    let remaining = if first.is_ok() { 0 } else { 1 };
    assert_eq!((after.allowed, after.remaining), (true, remaining), "the count carried over to the new master");
    if remaining == 1 {
        assert!(limiter.check("k", 1).await.unwrap().allowed);
    }
    assert!(!limiter.check("k", 1).await.unwrap().allowed);
    assert_eq!(cli(replica.port(), &["DBSIZE"]).trim(), "1", "the new master holds the state");
    drop(sentinel);
}
