//! A URL without the password, to a server that requires one, fails
//! `Store::redis` with the same `Error::Auth` as a wrong password, for a
//! single server, a master found through Sentinel and a cluster: start-up
//! asks a command that needs the credentials, instead of every later call
//! meeting `NOAUTH`.
//!
//! `cargo test --test connection missing_password::`

use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_cluster_port, free_port, RedisServer};
use std::process::Command;
use std::time::{Duration, Instant};

const PASSWORD: &str = "s3cret-Pa55";

/// Generous: the error asserted is the server's answer, not a connect timeout on a loaded machine.
fn patient() -> RedisOptions {
    RedisOptions::default().with_connect_timeout(Duration::from_secs(10))
}

/// `redis-cli` with the password, on `port`.
fn cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["--no-auth-warning", "-a", PASSWORD, "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `url` (no password) is refused at start-up as missing credentials, and
/// `with_password` (the same place, with it) decides.
async fn refused_without_and_decides_with(url: &str, with_password: &str) {
    let missing = Store::redis_with(url, patient()).await.expect_err("no password, so start-up must fail");
    let text = missing.to_string();
    println!("{text}");
    assert!(matches!(missing, Error::Auth(_)), "{missing:?}");
    assert!(!missing.is_unavailable(), "{missing:?}");
    assert!(text.starts_with(&format!("cannot connect to Redis at {url}: the credentials were refused")), "{text}");
    assert!(text.contains("NOAUTH"), "{text}");

    let store = Store::redis_with(with_password, patient()).await.unwrap();
    let limiter = Limiter::new("auth", Policy::gcra("1/1h", 0).unwrap(), &store);
    assert!(limiter.check("k", 1).await.unwrap().allowed);
    assert!(!limiter.check("k", 1).await.unwrap().allowed, "decided on the server");
}

#[tokio::test(flavor = "current_thread")]
async fn a_single_server_without_the_password_fails_start_up() {
    let server = RedisServer::start_on(free_port, &["--appendonly", "no", "--requirepass", PASSWORD], None);
    let port = server.port();
    refused_without_and_decides_with(&server.url(), &format!("redis://:{PASSWORD}@127.0.0.1:{port}")).await;
    // A user named without a password is refused the same way.
    let named = Store::redis_with(&format!("redis://default@127.0.0.1:{port}"), patient()).await.unwrap_err();
    assert!(matches!(named, Error::Auth(_)), "{named:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_sentinel_master_without_the_password_fails_start_up() {
    let master = RedisServer::start_on(free_port, &["--appendonly", "no", "--requirepass", PASSWORD], None);
    let sentinel =
        RedisServer::start_sentinel_with("auth", master.port(), &format!("sentinel auth-pass auth {PASSWORD}\n"));
    let port = sentinel.port();
    refused_without_and_decides_with(
        &format!("redis+sentinel://127.0.0.1:{port}/auth"),
        &format!("redis+sentinel://:{PASSWORD}@127.0.0.1:{port}/auth"),
    )
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_cluster_without_the_password_fails_start_up() {
    // A cluster of one master holding every slot: enough to need the password on a cluster connection.
    let node = RedisServer::start_on(
        free_cluster_port,
        &[
            "--appendonly",
            "no",
            "--requirepass",
            PASSWORD,
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ],
        None,
    );
    let port = node.port();
    assert_eq!(cli(port, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).trim(), "OK");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cli(port, &["CLUSTER", "INFO"]).contains("cluster_state:ok") {
        assert!(Instant::now() < deadline, "the one-node cluster did not reach cluster_state:ok");
        std::thread::sleep(Duration::from_millis(20));
    }
    refused_without_and_decides_with(
        &format!("redis+cluster://127.0.0.1:{port}"),
        &format!("redis+cluster://:{PASSWORD}@127.0.0.1:{port}"),
    )
    .await;
}
