//! Each misconfiguration is an error that says what it is: a malformed URL
//! (every form) names the wrong part and never the password, nothing
//! listening is a connection failure, a wrong password an authentication
//! failure. Each prints the error text it pins.
//!
//! `cargo test --test connection misconfig_errors::`

use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::time::{Duration, Instant};

const PASSWORD: &str = "s3cret-Pa55";

#[tokio::test(flavor = "current_thread")]
async fn a_malformed_url_of_each_form_names_the_wrong_part_and_never_the_password() {
    let cases = [
        (
            "redis://app:{pw}@127.0.0.1:x",
            "invalid Redis URL redis://app:***@127.0.0.1:x: invalid port `x` in `127.0.0.1:x`",
        ),
        ("redis://app:{pw}@127.0.0.1:6379/zero", "database `zero` is not a number"),
        ("redis://:{pw}@:6379", "empty host in `:6379`"),
        ("rediss://app:{pw}@127.0.0.1:70000", "invalid port `70000` in `127.0.0.1:70000`"),
        ("redis+cluster://app:{pw}@10.0.0.1:7000,10.0.0.2:x", "invalid port `x` in `10.0.0.2:x`"),
        ("redis+cluster://app:{pw}@10.0.0.1:7000/2", "a cluster has no database or path, found `/2`"),
        ("redis+sentinel://app:{pw}@10.0.0.1:26379", "no master name"),
        ("redis+sentinel://app:{pw}@10.0.0.1:y/mymaster", "invalid port `y` in `10.0.0.1:y`"),
        ("redis+sentinel://app:{pw}@10.0.0.1/mymaster/x", "database `x` is not a number"),
        ("http://app:{pw}@10.0.0.1", "unknown scheme `http://`"),
    ];
    for (url, expected) in cases {
        let url = url.replace("{pw}", PASSWORD);
        let error = Store::redis(&url).await.unwrap_err();
        let text = error.to_string();
        println!("{text}");
        assert!(matches!(error, Error::InvalidConfig(_)), "{url}: {error:?}");
        assert!(!error.is_unavailable(), "{url}");
        assert!(text.contains(expected), "{url}: {text}");
        assert!(text.contains("app:***@") || !url.contains("app:"), "{url}: {text}");
        assert!(!text.contains(PASSWORD) && !format!("{error:?}").contains(PASSWORD), "the password leaked: {text}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn nothing_listening_is_a_connection_failure_of_every_form() {
    let vacant = free_port();
    for url in [
        format!("redis://app:{PASSWORD}@127.0.0.1:{vacant}"),
        format!("redis+cluster://app:{PASSWORD}@127.0.0.1:{vacant}"),
        format!("redis+sentinel://app:{PASSWORD}@127.0.0.1:{vacant}/mymaster"),
    ] {
        let started = Instant::now();
        let error = Store::redis(&url).await.unwrap_err();
        // Within the connect timeout (1 s), and scheduling slack.
        assert!(started.elapsed() < Duration::from_secs(3), "{url}: took {:?}", started.elapsed());
        let text = error.to_string();
        println!("{text}");
        assert!(matches!(error, Error::Connection(_)), "{url}: {error:?}");
        assert!(error.is_unavailable(), "{url}");
        assert!(text.starts_with("cannot connect to Redis at "), "{text}");
        assert!(text.contains(&format!("app:***@127.0.0.1:{vacant}")), "{text}");
        assert!(!text.contains(PASSWORD), "the password leaked: {text}");
        assert!(std::error::Error::source(&error).is_some() || text.contains("no answer within"), "{error:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_wrong_or_missing_password_is_an_authentication_failure() {
    let server = RedisServer::start_on(free_port, &["--appendonly", "no", "--requirepass", PASSWORD], None);
    let port = server.port();

    // Generous: the error asserted is the server's answer, not a connect timeout on a loaded machine.
    let patient = RedisOptions::default().with_connect_timeout(Duration::from_secs(10));
    let wrong =
        Store::redis_with(&format!("redis://:not-the-Pa55@127.0.0.1:{port}"), patient.clone()).await.unwrap_err();
    let text = wrong.to_string();
    println!("{text}");
    assert!(matches!(wrong, Error::Auth(_)), "{wrong:?}");
    assert!(!wrong.is_unavailable());
    assert!(
        text.starts_with(&format!(
            "cannot connect to Redis at redis://:***@127.0.0.1:{port}: the credentials were refused"
        )),
        "{text}"
    );
    assert!(!text.contains("not-the-Pa55"), "the password leaked: {text}");

    // No password at all: Redis says NOAUTH, at connect or at the first call.
    let missing = match Store::redis_with(&server.url(), patient).await {
        Err(error) => error,
        Ok(store) => Limiter::new("auth", Policy::gcra("1/1s", 0).unwrap(), &store).check("k", 1).await.unwrap_err(),
    };
    println!("{missing}");
    assert!(matches!(missing, Error::Auth(_)), "{missing:?}");
    assert!(missing.to_string().contains("NOAUTH"), "{missing}");

    let right = Store::redis(&format!("redis://:{PASSWORD}@127.0.0.1:{port}")).await.unwrap();
    let limiter = Limiter::new("auth", Policy::gcra("1/1s", 0).unwrap(), &right);
    assert!(limiter.check("k", 1).await.unwrap().allowed);
}

#[tokio::test(flavor = "current_thread")]
async fn failing_fast_names_the_failure_once() {
    let mut server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("fast", Policy::gcra("1/1s", 0).unwrap(), &store).with_deny_cache(false);
    limiter.check("k", 1).await.unwrap();
    server.kill();
    // A dead socket first (not evidence of an outage), then the failure that opens the breaker.
    let mut failures = Vec::new();
    while !failures.last().is_some_and(|e| matches!(e, Error::Unavailable(_))) {
        failures.push(limiter.check("k", 1).await.unwrap_err());
        assert!(failures.len() < 10, "{failures:?}");
    }
    let fast = failures.pop().unwrap();
    let tripped = failures.pop().unwrap();
    println!("{tripped}\n{fast}");
    assert!(tripped.is_unavailable() && fast.is_unavailable(), "{tripped:?} {fast:?}");
    assert_eq!(fast.to_string(), format!("{tripped} (Redis is not asked again for 250ms)"));
    assert_eq!(std::error::Error::source(&fast).map(ToString::to_string), Some(tripped.to_string()));
    for error in [&tripped, &fast] {
        let text = error.to_string();
        for phrase in ["rate limit store", "cannot reach", "not asked again"] {
            assert!(text.matches(phrase).count() <= 1, "read once: {text}");
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_port_that_does_not_speak_redis_is_a_connection_failure() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // An HTTP server where Redis was expected: it answers every connection with a 400.
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.read(&mut [0u8; 512]);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let error = Store::redis(&format!("redis://127.0.0.1:{port}")).await.unwrap_err();
    println!("{error}");
    assert!(matches!(error, Error::Connection(_)), "{error:?}");
    assert!(error.to_string().starts_with(&format!("cannot connect to Redis at redis://127.0.0.1:{port}")), "{error}");
}
