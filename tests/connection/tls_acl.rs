//! TLS and ACL: a redis-server that speaks only TLS, with a certificate
//! made by this test, the default user off and a user allowed only what the
//! limiter needs. Decisions work; a wrong password or an untrusted
//! certificate is a clear error.

use redlimit::{Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA and a server certificate for 127.0.0.1, made with the openssl CLI.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    redlimit_test_support::programs::require("openssl");
    std::fs::create_dir_all(dir).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=redlimit test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
    (dir.join("ca.crt"), dir.join("server.crt"), dir.join("server.key"))
}

/// Exactly the commands redis-rs's handshake, `ratelimit/src/backend/redis` and `ratelimit/lua/*.lua` may send.
const LIMITER_ACL: &str = "limiter on >s3cret ~redlimit:* resetchannels -@all \
     +auth +select +ping +info +script|load +evalsha +wait +del +cluster|slots +asking \
     +time +exists +get +getrange +set +setrange +append +incr +incrby +decrby +pttl +pexpire \
     +hgetall +hmget +hset +hincrby +zscore +zrange +zrangebyscore +zremrangebyscore +zadd +zrem";

#[tokio::test]
async fn tls_with_an_acl_user_decides_and_bad_credentials_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("redlimit-tls-{}", std::process::id()));
    let (ca, cert, key) = certificates(&dir);
    let (ca, cert, key) = (ca.to_str().unwrap(), cert.to_str().unwrap(), key.to_str().unwrap());
    let port = free_port();
    let cli = vec!["--tls".to_string(), "--cacert".to_string(), ca.to_string()];
    // On the command line each ACL rule is its own argument after `--user`.
    let mut args = vec![
        "--appendonly",
        "no",
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--tls-ca-cert-file",
        ca,
        "--tls-auth-clients",
        "no",
    ];
    args.extend(["--user", "default", "off", "--user"]);
    args.extend(LIMITER_ACL.split_whitespace());
    // Sentinel's own user on the master (it needs INFO, PUBLISH, ...).
    args.extend(["--user", "watcher", "on", ">w4tch", "~*", "&*", "+@all"]);
    let _server = RedisServer::start_with(port, &args, Some(cli));
    // A handshake on a loaded machine can take a while: the errors asserted
    // below must be the server's answers, not a connect timeout.
    let trusted = RedisOptions::default()
        .with_tls_root_cert(std::fs::read(ca).unwrap())
        .with_connect_timeout(std::time::Duration::from_secs(10));

    let store = Store::redis_with(&format!("rediss://limiter:s3cret@127.0.0.1:{port}"), trusted.clone()).await.unwrap();
    for (i, policy) in [
        // One window on Redis's clock is a counter: its denial gives the permit back with DECRBY.
        Policy::fixed_window("2/1m").unwrap(),
        // Minutes, not seconds: the third call is denied however slowly a
        // loaded machine makes the three.
        Policy::fixed_window("2/1m,5/1h").unwrap(),
        Policy::sliding_window("2/1m", "1s").unwrap(),
        Policy::sliding_log("2/1m").unwrap(),
        Policy::token_bucket(2, "1/1m").unwrap(),
        Policy::leaky_bucket(2, "1/1m").unwrap(),
        Policy::gcra("1/1m", 1).unwrap(),
    ]
    .into_iter()
    .enumerate()
    {
        // A limiter of its own: the two fixed windows would count on one key.
        let limiter = Limiter::new(format!("tls.{i}"), policy.clone(), &store);
        assert!(limiter.check("k", 1).await.unwrap().allowed, "{policy}");
        assert!(limiter.check("k", 1).await.unwrap().allowed, "{policy}");
        assert!(!limiter.check("k", 1).await.unwrap().allowed, "{policy}");
        limiter.reset("k").await.unwrap();
        assert!(limiter.check("k", 1).await.unwrap().allowed, "{policy}: reset");
    }
    // Permits held are a sorted set, read with ZSCORE.
    let permits = Limiter::new("tls.permits", Policy::concurrency(1, "30s").unwrap(), &store);
    let permit = permits.acquire("k").await.unwrap();
    assert!(permits.acquire("k").await.is_err(), "one permit is held");
    permit.release().await.unwrap();
    assert!(permits.acquire("k").await.is_ok(), "given back");

    let wrong =
        Store::redis_with(&format!("rediss://limiter:wrong@127.0.0.1:{port}"), trusted.clone()).await.unwrap_err();
    assert!(matches!(wrong, redlimit::Error::Auth(_)), "{wrong:?}");
    let wrong = wrong.to_string();
    assert!(
        wrong.contains("cannot connect to Redis at rediss://limiter:***@127.0.0.1")
            && wrong.to_lowercase().contains("authentication failed"),
        "{wrong}"
    );
    assert!(!wrong.contains("wrong@"), "the password leaked: {wrong}");

    // No root certificate of ours, but the same patience: the error must be
    // the handshake's, not a connect timeout.
    let untrusting = RedisOptions::default().with_connect_timeout(std::time::Duration::from_secs(10));
    let untrusted =
        Store::redis_with(&format!("rediss://limiter:s3cret@127.0.0.1:{port}"), untrusting).await.unwrap_err();
    assert!(matches!(untrusted, redlimit::Error::Connection(_)), "a failed TLS handshake: {untrusted:?}");
    let untrusted = untrusted.to_string();
    assert!(
        untrusted.contains("cannot connect to Redis") && untrusted.to_lowercase().contains("certificate"),
        "{untrusted}"
    );

    // Through Sentinel: the sentinel is plain TCP, the master it names is
    // TLS-only and trusted through the same private CA.
    let sentinel_tls = format!("tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {ca}\ntls-replication yes\nsentinel auth-user tlsmaster watcher\nsentinel auth-pass tlsmaster w4tch\n");
    let sentinel = RedisServer::start_sentinel_with("tlsmaster", port, &sentinel_tls);
    let through_sentinel = format!("rediss+sentinel://watcher:w4tch@127.0.0.1:{}/tlsmaster", sentinel.port());
    let store = Store::redis_with(&through_sentinel, trusted.clone()).await.unwrap();
    let limiter = Limiter::new("tls.sentinel", Policy::gcra("1/1m", 0).unwrap(), &store);
    assert!(limiter.check("k", 1).await.unwrap().allowed);
    assert!(!limiter.check("k", 1).await.unwrap().allowed, "decided on the TLS master");
    let untrusted = Store::redis_with(&through_sentinel, RedisOptions::default()).await.unwrap_err().to_string();
    assert!(untrusted.contains("cannot connect to Redis"), "{untrusted}");

    let plain = Store::redis_with(&format!("redis://limiter:s3cret@127.0.0.1:{port}"), RedisOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(plain.contains("cannot connect to Redis"), "{plain}");
    let _ = std::fs::remove_dir_all(&dir);
}
