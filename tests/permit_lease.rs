//! A concurrency permit's lease, and what its holder is told about it:
//!
//! - a lease shorter than 100 ms is refused with a clear error (in code and
//!   in a policy file; the attribute's is in tests/ui/fail);
//! - a permit outlives an outage of most of its lease: a failed renewal is
//!   tried again soon, so once Redis is back the permit is renewed before
//!   its lease ends, and a second caller is still denied;
//! - a permit whose lease is lost tells its holder (`Permit::is_lost`,
//!   `Permit::lost`), counts it (`redlimit_permit_leases_lost_total`) and
//!   logs it (WARN): when Redis loses its data (FLUSHALL), and when Redis is
//!   frozen past the lease (no renewal answered before it ended); an
//!   annotated body learns it from `redlimit::permit_lost`;
//! - outside a tokio runtime a permit is never renewed: it holds one lease,
//!   then says it is lost, and another caller may take it.
//!
//! Count-bounded: each waits for one event, under generous upper bounds (a
//! lease, a timeout of seconds) the code guarantees.
//!
//! `cargo test --test permit_lease` (the Redis cases need `redis-server`)

use futures_util::FutureExt;
use redlimit::policies::PolicySet;
use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::log_capture::LogCapture;
use std::time::Duration;

#[test]
fn a_lease_shorter_than_a_renewal_can_keep_is_refused() {
    for short in ["1ms", "4ms", "99ms", "99999us"] {
        let error = Policy::concurrency(2, short).unwrap_err().to_string();
        assert!(error.contains("too short to be renewed while the call runs"), "{short}: {error}");
        assert!(error.contains("use at least 100ms"), "{short}: {error}");
    }
    assert_eq!(Policy::concurrency(2, "100ms").unwrap().lease(), Some(Duration::from_millis(100)));
    let file = "[policies.jobs]\nalgo = \"concurrency\"\nlimit = 2\nlease = \"5ms\"\n";
    let error = PolicySet::parse("p.toml", file).unwrap_err().to_string();
    assert!(error.contains("a lease of 5ms is too short to be renewed"), "{error}");
}

/// Outside any runtime (a plain `#[test]`): the memory store answers at
/// once, so its calls complete in one poll.
#[test]
fn outside_a_runtime_a_permit_holds_one_lease_then_says_it_is_lost() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let limiter = Limiter::new("lease.no_runtime", Policy::concurrency(1, "100ms").unwrap(), &Store::memory());
    let permit = limiter.acquire("k").now_or_never().expect("answered at once").expect("the permit");
    assert!(permit.is_held() && !permit.is_lost());
    assert!(limiter.acquire("k").now_or_never().unwrap().is_err(), "held during its lease");
    assert!(logs.text().contains("taken outside a tokio runtime: it is never renewed"), "{}", logs.text());
    // Not renewed: once its lease has run out, the store gives it to another caller...
    let other = loop {
        std::thread::sleep(Duration::from_millis(20));
        if let Ok(other) = limiter.acquire("k").now_or_never().unwrap() {
            break other;
        }
    };
    // ... and the first holder is told.
    assert!(permit.is_lost() && !permit.is_held(), "{permit:?}");
    assert!(!other.is_lost());
    permit.lost().now_or_never().expect("lost() is ready once lost");
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use redlimit::{rate_limit, DenialReason, OnError, Permit, RateLimited, RedisOptions};
    use redlimit_test_support::metrics_capture;
    use redlimit_test_support::redis_server::RedisServer;
    use std::time::Instant;

    fn signal(server: &RedisServer, which: &str) {
        let pid = server.pid().unwrap().to_string();
        assert!(std::process::Command::new("kill").args([which, &pid]).status().unwrap().success());
    }

    async fn connection(server: &RedisServer) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(server.url()).unwrap();
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
        client.get_multiplexed_async_connection_with_config(&config).await.unwrap()
    }

    /// When the newest lease held on any concurrency key ends (Redis µs).
    async fn last_lease_end(server: &RedisServer) -> Option<u64> {
        let mut con = connection(server).await;
        let keys: Vec<String> = redis::cmd("KEYS").arg("redlimit:concurrency*").query_async(&mut con).await.unwrap();
        let key = keys.first()?;
        let last: Vec<(Vec<u8>, f64)> =
            redis::cmd("ZRANGE").arg(key).arg(-1).arg(-1).arg("WITHSCORES").query_async(&mut con).await.unwrap();
        last.first().map(|(_, score)| *score as u64)
    }

    /// The first answer `limiter` gives on "k": a store that did not answer
    /// in time (a loaded machine, a reconnect) is asked again, at most 200 times.
    async fn answered(limiter: &Limiter) -> Result<Permit, RateLimited> {
        for _ in 0..200 {
            match limiter.acquire("k").await {
                Err(denied) if denied.reason() == DenialReason::StoreUnavailable => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                answered => return answered,
            }
        }
        panic!("the store never answered");
    }

    /// A lease of 1.5 s (renewed every 500 ms) and Redis killed just after a
    /// renewal, restarted (its data kept) 1.08 s later: every renewal tried
    /// meanwhile fails without reaching Redis, within its 50 ms response
    /// timeout. Renewing only every third of the lease, the tries at 0.5 s
    /// and 1.05 s fail and the next comes after the lease ended; tried again
    /// soon (at most 75 ms apart), one lands once Redis is back, before the
    /// lease ends: the permit is still held, and a second caller is denied.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_permit_outlives_an_outage_of_most_of_its_lease() {
        let mut server = RedisServer::start_persistent();
        let options = RedisOptions::default()
            .with_response_timeout(Duration::from_millis(50))
            .with_retry_interval(Duration::from_millis(20));
        let store = Store::redis_with(&server.url(), options).await.unwrap();
        let policy = Policy::concurrency(1, "1500ms").unwrap();
        let limiter = Limiter::new("lease.outage", policy.clone(), &store).with_on_error(OnError::Deny);
        let permit = answered(&limiter).await.expect("the permit");
        // Just after a renewal: the lease's end moves.
        let taken = last_lease_end(&server).await.expect("the lease");
        let mut polls = 0;
        while last_lease_end(&server).await == Some(taken) {
            polls += 1;
            assert!(polls < 10_000, "never renewed");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let down = Instant::now();
        server.kill();
        tokio::time::sleep(Duration::from_millis(1080)).await;
        server.restart();
        let outage = down.elapsed();
        // Past the end of the lease as it was when Redis went down.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert!(!permit.is_lost(), "lost after an outage of {outage:?}");
        assert!(permit.is_held(), "{permit:?}");
        let second = answered(&limiter).await;
        assert!(second.is_err(), "a second holder after an outage of {outage:?}: {second:?}");
        permit.release().await.unwrap();
    }

    /// Redis loses every key while a permit is held: the next renewal finds
    /// the lease gone, and the holder is told.
    #[tokio::test(flavor = "current_thread")]
    async fn a_holder_is_told_when_redis_loses_its_lease() {
        let logs = LogCapture::default();
        let _guard = logs.install();
        let lost_before =
            metrics_capture::counter("redlimit_permit_leases_lost_total", &[("limiter", "lease.flushed")]);
        let server = RedisServer::start();
        let store = Store::redis(&server.url()).await.unwrap();
        let limiter = Limiter::new("lease.flushed", Policy::concurrency(1, "600ms").unwrap(), &store);
        let permit = limiter.acquire("k").await.unwrap();
        assert!(!permit.is_lost());
        let _: () = redis::cmd("FLUSHALL").query_async(&mut connection(&server).await).await.unwrap();
        // The next renewal is due within a third of the lease.
        let told = tokio::time::timeout(Duration::from_secs(10), permit.lost()).await;
        assert!(told.is_ok(), "never told");
        assert!(permit.is_lost() && !permit.is_held(), "{permit:?}");
        assert!(logs.text().contains("lease was lost (the store no longer held it"), "{}", logs.text());
        let lost = metrics_capture::counter("redlimit_permit_leases_lost_total", &[("limiter", "lease.flushed")]);
        assert_eq!(lost - lost_before, 1);
        // Another caller holds it now: the store lost the first.
        let other = limiter.acquire("k").await;
        assert!(other.is_ok(), "{other:?}");
    }

    /// Holds its permit until told the lease was lost, for at most 10 s:
    /// whether it was told.
    #[rate_limit(name = "lease.annotated", algo = "concurrency", limit = 1, lease = "600ms", key = "k")]
    async fn until_told(started: tokio::sync::oneshot::Sender<()>) -> Result<bool, RateLimited> {
        assert!(!redlimit::permit_lost(), "held when the body starts");
        let _ = started.send(());
        let told = tokio::time::timeout(Duration::from_secs(10), redlimit::until_permit_lost()).await.is_ok();
        Ok(told && redlimit::permit_lost())
    }

    /// The same for an annotated function's body: `redlimit::permit_lost`.
    #[tokio::test(flavor = "current_thread")]
    async fn an_annotated_body_is_told_when_redis_loses_its_lease() {
        let server = RedisServer::start();
        let store = Store::redis(&server.url()).await.unwrap();
        let (started, body_runs) = tokio::sync::oneshot::channel();
        let call = tokio::spawn(redlimit::scope(store.clone(), until_told(started)));
        body_runs.await.unwrap();
        let _: () = redis::cmd("FLUSHALL").query_async(&mut connection(&server).await).await.unwrap();
        assert!(call.await.unwrap().expect("the permit"), "the body was told");
        assert!(!redlimit::permit_lost(), "outside the body");
    }

    /// Redis frozen (SIGSTOP) past the lease: no renewal is answered before
    /// the lease ends, so the holder is told while Redis is still frozen.
    #[tokio::test(flavor = "current_thread")]
    async fn a_holder_is_told_when_no_renewal_is_answered_before_its_lease_ends() {
        let logs = LogCapture::default();
        let _guard = logs.install();
        let server = RedisServer::start();
        let options = RedisOptions::default().with_response_timeout(Duration::from_millis(200));
        let store = Store::redis_with(&server.url(), options).await.unwrap();
        let limiter = Limiter::new("lease.frozen", Policy::concurrency(1, "600ms").unwrap(), &store);
        let permit = limiter.acquire("k").await.unwrap();
        signal(&server, "-STOP");
        let told = tokio::time::timeout(Duration::from_secs(10), permit.lost()).await;
        signal(&server, "-CONT");
        assert!(told.is_ok(), "never told");
        assert!(permit.is_lost() && !permit.is_held(), "{permit:?}");
        assert!(logs.text().contains("no renewal was answered before it ended"), "{}", logs.text());
    }
}
