//! What the Redis backend promises: one EVALSHA per decision, scripts loaded
//! at start-up and reloaded after SCRIPT FLUSH, a TTL on every key, bounded
//! connects and round trips.

use redis::AsyncCommands;
use redlimit::{Error, Limiter, ManualClock, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::time::{Duration, Instant};

async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

fn every_algorithm() -> Vec<Policy> {
    vec![
        Policy::fixed_window("2/1s,3/10s,5/1m").unwrap(),
        Policy::sliding_window("2/1s,3/10s,5/1m", "1s").unwrap(),
        Policy::sliding_log("2/1s,3/10s,5/1m").unwrap(),
        Policy::token_bucket(3, "1/1s").unwrap(),
        Policy::leaky_bucket(3, "1/1s").unwrap(),
        Policy::gcra("1/1s", 2).unwrap(),
    ]
}

#[tokio::test]
async fn every_decision_is_exactly_one_evalsha_whatever_the_strategies() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    for policy in every_algorithm() {
        // The deny cache would answer repeated denials without a trip at all.
        let limiter = Limiter::new("one-trip", policy.clone(), &store).with_deny_cache(false);
        let before = (server.command_calls("evalsha").await, server.command_calls("eval").await);
        for i in 0..10 {
            limiter.check(format!("k{}", i % 3), 1).await.unwrap();
        }
        let after = (server.command_calls("evalsha").await, server.command_calls("eval").await);
        assert_eq!((after.0 - before.0, after.1 - before.1), (10, 0), "{policy}");
    }
}

#[tokio::test]
async fn scripts_are_loaded_with_a_policys_first_call_and_reloaded_after_a_flush() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let mut con = raw(&server).await;
    // One script per family of algorithm, loaded with the family's first call.
    let policy = Policy::gcra("1/1s", 5).unwrap();
    let own = redis::Script::new(&redlimit::__private::script_source(&policy, true)).get_hash().to_string();
    let exists = |con: &mut redis::aio::MultiplexedConnection| {
        let (mut con, own) = (con.clone(), own.clone());
        async move { redis::cmd("SCRIPT").arg("EXISTS").arg(own).query_async::<Vec<bool>>(&mut con).await.unwrap()[0] }
    };
    assert!(!exists(&mut con).await, "loaded on the family's first call, not before");
    let limiter = Limiter::new("flush", policy, &store);
    limiter.check("k", 1).await.unwrap();
    assert!(exists(&mut con).await, "loaded with the family's first call");
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut con).await.unwrap();
    let d = limiter.check("k", 1).await.expect("NOSCRIPT after SCRIPT FLUSH must be handled");
    assert_eq!(d.remaining, 4, "the state survived the flush and the reload counted once");
    assert!(exists(&mut con).await, "loaded again after the flush");
}

#[tokio::test]
async fn every_key_written_has_a_ttl() {
    let server = RedisServer::start();
    let server_time = Store::redis(&server.url()).await.unwrap();
    let manual = server_time.clone().with_clock(ManualClock::new());
    for store in [&server_time, &manual] {
        for policy in every_algorithm() {
            let limiter = Limiter::new("ttl", policy, store);
            for i in 0..20 {
                limiter.check(format!("user-{}", i % 4), 1 + i % 2).await.unwrap();
            }
        }
    }
    let mut con = raw(&server).await;
    let keys: Vec<String> = con.keys("*").await.unwrap();
    assert!(keys.len() >= 24, "expected keys from every algorithm, found {keys:?}");
    for key in keys {
        let ttl: i64 = con.pttl(&key).await.unwrap();
        assert!(ttl > 0, "{key} has no TTL ({ttl})");
    }
}

#[tokio::test]
async fn keys_say_which_limiter_and_algorithm_they_belong_to() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap().with_prefix("app");
    Limiter::new("login", Policy::gcra("1/1s", 1).unwrap(), &store).check("alice", 1).await.unwrap();
    let mut con = raw(&server).await;
    let keys: Vec<String> = con.keys("*").await.unwrap();
    assert_eq!(keys, vec!["app:gcra/v2:5:login:alice".to_string()]);
}

#[tokio::test]
async fn connecting_to_nothing_is_a_clear_error_not_a_hang() {
    let vacant = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let options = RedisOptions::default().with_connect_timeout(Duration::from_millis(300));
    let err = Store::redis_with(&format!("redis://127.0.0.1:{vacant}"), options).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(matches!(err, Error::Connection(_)) && err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains(&format!("cannot connect to Redis at redis://127.0.0.1:{vacant}")), "{err}");

    let err = Store::redis("http://localhost").await.unwrap_err();
    assert!(err.to_string().contains("invalid Redis URL http://localhost: unknown scheme `http://`"), "{err}");
}

#[tokio::test]
async fn a_frozen_server_gives_a_timeout_within_the_response_timeout() {
    let server = RedisServer::start();
    let options = RedisOptions::default().with_response_timeout(Duration::from_millis(200));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let limiter = Limiter::new("frozen", Policy::fixed_window("5/1s").unwrap(), &store);
    limiter.check("k", 1).await.unwrap();
    let pid = server.pid().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let started = Instant::now();
    let result = limiter.check("k", 1).await;
    let took = started.elapsed();
    std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap();
    assert!(matches!(result, Err(Error::Timeout(_))), "{result:?}");
    assert!(took < Duration::from_millis(600), "took {took:?}");
}

/// A server that accepts and never answers (hung, or a black-holing proxy):
/// `Store::redis` fails within the connect timeout, not a multiple of it,
/// whatever the reconnect retries.
#[tokio::test]
async fn a_never_answering_server_fails_within_the_connect_timeout() {
    let silent = redlimit_test_support::silent_listener::SilentListener::start();
    for (connect_timeout, reconnect_retries) in [(Duration::from_millis(300), 3), (Duration::from_secs(1), 10)] {
        let options =
            RedisOptions::default().with_connect_timeout(connect_timeout).with_reconnect_retries(reconnect_retries);
        let started = Instant::now();
        let err = Store::redis_with(&silent.url(), options).await.unwrap_err();
        let took = started.elapsed();
        // The margin is scheduling on a busy machine; the bound is the timeout.
        assert!(took < connect_timeout + Duration::from_secs(1), "took {took:?} for a timeout of {connect_timeout:?}");
        assert!(err.to_string().contains(&format!("no answer within {connect_timeout:?}")), "{err}");
    }
    assert!(silent.accepted() >= 2, "the connects reached the listener");
}

/// A URL of any size and bytes gives an error of bounded size, its parts
/// quoted and escaped (the message names what is wrong, not the whole input).
#[tokio::test]
async fn a_huge_or_hostile_url_gives_a_bounded_escaped_error() {
    let long = "h".repeat(500_000);
    for url in [
        format!("redis://{long}:x"),
        format!("redis+cluster://{long}:1,:2"),
        format!("redis+sentinel://{long}:1/"),
        format!("nope{long}://host"),
        "redis+cluster://a:1\x1b[31m,b:x".to_string(),
    ] {
        let message = match Store::redis(&url).await {
            Err(error) => error.to_string(),
            Ok(_) => panic!("{} connected", &url[..20]),
        };
        assert!(message.len() < 1_000, "{} bytes: {}", message.len(), &message[..200]);
        assert!(!message.contains('\x1b'), "control bytes echoed: {message}");
    }
}
