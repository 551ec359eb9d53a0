//! The global store: built from `REDLIMIT_REDIS_URL` on first use, in memory
//! when it is unset (said once in a log line), a clear error when it points
//! at nothing. One test, because the environment is process-wide.

use redlimit::__private::from_env;
use redlimit::{global, REDIS_URL_VAR};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::RedisServer;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "current_thread")]
async fn the_environment_chooses_the_store() {
    let logs = LogCapture::default();
    let _guard = logs.install();

    // Pointing at nothing: an error naming the URL, within the connect timeout (1 s).
    let vacant = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::env::set_var(REDIS_URL_VAR, format!("redis://127.0.0.1:{vacant}"));
    let started = Instant::now();
    let err = from_env().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert!(err.to_string().contains(&format!("cannot connect to Redis at redis://127.0.0.1:{vacant}")), "{err}");

    // Pointing at a live server: Redis.
    let server = RedisServer::start();
    std::env::set_var(REDIS_URL_VAR, server.url());
    assert_eq!(from_env().await.unwrap().kind(), "redis");

    // Unset: memory, said once however often the global store is asked for.
    std::env::remove_var(REDIS_URL_VAR);
    assert_eq!(global().await.unwrap().kind(), "memory");
    assert_eq!(global().await.unwrap().kind(), "memory");
    let text = logs.text();
    assert_eq!(text.matches("REDLIMIT_REDIS_URL is not set").count(), 1, "{text}");
}
