//! The global store: built from `RATELIMIT_REDIS_URL` on first use, in memory
//! when it is unset (said once in a log line), a clear error when it points
//! at nothing. One test, because the environment is process-wide.

use ratelimit::{from_env, global, REDIS_URL_VAR};
use ratelimit_examples::redis_server::RedisServer;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_environment_chooses_the_store() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // Pointing at nothing: an error naming the URL, within seconds.
    let vacant = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::env::set_var(REDIS_URL_VAR, format!("redis://127.0.0.1:{vacant}"));
    let started = Instant::now();
    let err = from_env().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(err.to_string().contains(&format!("cannot connect to Redis at redis://127.0.0.1:{vacant}")), "{err}");

    // Pointing at a live server: Redis.
    let server = RedisServer::start();
    std::env::set_var(REDIS_URL_VAR, server.url());
    assert_eq!(from_env().await.unwrap().backend().kind(), "redis");

    // Unset: memory, said once however often the global store is asked for.
    std::env::remove_var(REDIS_URL_VAR);
    assert_eq!(global().await.unwrap().backend().kind(), "memory");
    assert_eq!(global().await.unwrap().backend().kind(), "memory");
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("RATELIMIT_REDIS_URL is not set").count(), 1, "{text}");
}
