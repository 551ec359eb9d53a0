//! A concurrency permit is held exactly as long as the code holding it
//! runs, on the memory store and on a private Redis:
//!
//! - a body longer than its lease keeps its permit (the lease is renewed):
//!   `Permit::is_held` stays true and every other acquisition is denied
//!   throughout; the permit is given back when the body ends;
//! - an annotated call dropped mid-body (a `timeout`, a `select!` another
//!   branch won, an aborted task) or whose body panics gives its permit back;
//! - an acquisition dropped, or whose answer timed out, after the store
//!   took its permit holds nothing either (ignored while that permit is
//!   leaked until its lease ends).
//!
//! The memory store gives a permit back as it is dropped; on Redis a task
//! spawned by the drop does, so the Redis cases poll a bounded number of
//! times for it.
//!
//! `cargo test --test permits concurrency_permits::` (the Redis cases need `redis-server`)

use redlimit::{rate_limit, Limiter, Policy, RateLimited, Store};
use std::time::Duration;
use tokio::sync::oneshot;

/// The long bodies' lease: renewed every 500 ms, so a renewal may come a
/// whole second late on a loaded machine and still find it running.
const LEASE: &str = "1500ms";
/// A long body checks this often...
const CHECK_EVERY: Duration = Duration::from_millis(250);
/// ... this many times: at least 4 s, more than two leases.
const CHECKS: u32 = 16;

/// How a store gives back a dropped permit.
#[derive(Clone, Copy, Debug)]
enum Release {
    /// In the drop itself (the memory store).
    AtOnce,
    /// By a task the drop spawns (Redis): tried up to 500 times, 10 ms apart.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Soon,
}

impl Release {
    fn tries(self) -> usize {
        match self {
            Release::AtOnce => 1,
            Release::Soon => 500,
        }
    }
}

/// Whether `try_once` passes within `release`'s tries.
async fn passes<F: std::future::Future<Output = bool>>(release: Release, mut try_once: impl FnMut() -> F) -> bool {
    for i in 0..release.tries() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if try_once().await {
            return true;
        }
    }
    false
}

fn long_policy() -> Policy {
    Policy::concurrency(1, LEASE).unwrap()
}

/// Holds the site's permit of `long:<id>` for [`CHECKS`] × [`CHECK_EVERY`],
/// checking each time that `other` (a limiter of the site's name and
/// policy) cannot take it: how many times it could not.
#[rate_limit(name = "permits.long", algo = "concurrency", limit = 1, lease = "1500ms", key = "long:<id>")]
async fn long_job(id: &str, other: &Limiter) -> Result<u32, RateLimited> {
    let mut denied = 0;
    for check in 0..CHECKS {
        tokio::time::sleep(CHECK_EVERY).await;
        match other.acquire(format!("long:{id}")).await {
            Err(_) => denied += 1,
            Ok(permit) => panic!("check {check}: a second permit {permit:?} while the body runs"),
        }
    }
    Ok(denied)
}

/// A long body on `store`: through `Limiter::acquire` (the permit watched
/// with `is_held`) and through [`long_job`], side by side.
async fn a_body_longer_than_its_lease_keeps_its_permit(store: Store, release: Release) {
    let limiter = Limiter::new("permits.long", long_policy(), &store);
    let other = Limiter::new("permits.long", long_policy(), &store);
    let held = async {
        let permit = limiter.acquire("plain").await.expect("the first permit");
        assert!(permit.is_held());
        for check in 0..CHECKS {
            tokio::time::sleep(CHECK_EVERY).await;
            assert!(permit.is_held(), "check {check}: the lease was lost");
            let second = other.acquire("plain").await;
            assert!(second.is_err(), "check {check}: a second permit {second:?} while the first is held");
        }
        drop(permit);
        assert!(passes(release, || async { other.acquire("plain").await.is_ok() }).await, "given back at the end");
    };
    let annotated = async {
        let denied = redlimit::scope(store.clone(), long_job("a", &other)).await;
        assert_eq!(denied.expect("the long job runs"), CHECKS, "denied at every check");
        let again = || async { other.acquire("long:a").await.is_ok() };
        assert!(passes(release, again).await, "the annotated call's permit is given back when its body ends");
    };
    tokio::join!(held, annotated);
}

/// How a [`job`] ends once told to.
enum End {
    Return,
    Panic,
}

/// Holds the site's permit of `job:<id>` (limit 1) until `until` says how
/// to end, or its sender is dropped (then it returns): with a sender kept
/// and never used, it waits forever. `started` hears when the body runs.
#[rate_limit(name = "permits.job", algo = "concurrency", limit = 1, lease = "30s", key = "job:<id>")]
async fn job(id: &str, started: Option<oneshot::Sender<()>>, until: oneshot::Receiver<End>) -> Result<(), RateLimited> {
    if let Some(started) = started {
        let _ = started.send(());
    }
    match until.await {
        Ok(End::Panic) => panic!("job {id}'s body panics, as told"),
        Ok(End::Return) | Err(_) => Ok(()),
    }
}

/// Whether a call of [`job`] on `id` gets its permit now (its body then returns at once).
async fn job_passes(id: &str) -> bool {
    let (_, ends_at_once) = oneshot::channel();
    job(id, None, ends_at_once).await.is_ok()
}

/// A call of [`job`] on `id` that runs until dropped, and the word that its body runs.
#[allow(clippy::type_complexity)]
fn endless_job(
    id: &'static str,
) -> (impl std::future::Future<Output = Result<(), RateLimited>>, oneshot::Receiver<()>, oneshot::Sender<End>) {
    let (started, started_rx) = oneshot::channel();
    let (never, until) = oneshot::channel();
    (job(id, Some(started), until), started_rx, never)
}

/// Every way an annotated call can stop mid-body gives its permit back,
/// on `store` (the global store of each call, through `redlimit::scope`).
async fn stopped_bodies_give_their_permits_back(store: Store, release: Release) {
    let freed = |id: &'static str| {
        let store = store.clone();
        async move { passes(release, || redlimit::scope(store.clone(), job_passes(id))).await }
    };

    // A timeout around a call whose body waits forever.
    let (call, started, _never) = endless_job("timeout");
    let mut call = Box::pin(redlimit::scope(store.clone(), call));
    tokio::select! {
        _ = &mut call => panic!("the body waits forever"),
        started = started => started.unwrap(),
    }
    assert!(!redlimit::scope(store.clone(), job_passes("timeout")).await, "held while the body runs");
    let timed_out = tokio::time::timeout(Duration::from_millis(20), call).await;
    assert!(timed_out.is_err(), "the body waits forever");
    assert!(freed("timeout").await, "{release:?}: given back when the timeout dropped the call");

    // A select! whose other branch wins while the body runs.
    let (call, started, _never) = endless_job("select");
    let held_meanwhile = redlimit::scope(store.clone(), async {
        tokio::select! {
            _ = call => panic!("the body waits forever"),
            passed = async { started.await.unwrap(); job_passes("select").await } => !passed,
        }
    })
    .await;
    assert!(held_meanwhile, "held while the body runs");
    assert!(freed("select").await, "{release:?}: given back when select! dropped the call");

    // A task aborted while the body runs.
    let (call, started, _never) = endless_job("abort");
    let task = tokio::spawn(redlimit::scope(store.clone(), call));
    started.await.unwrap();
    assert!(!redlimit::scope(store.clone(), job_passes("abort")).await, "held while the body runs");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(freed("abort").await, "{release:?}: given back when the task was aborted");

    // A body that panics, in a task of its own.
    let (started, started_rx) = oneshot::channel();
    let (tell, until) = oneshot::channel();
    let task = tokio::spawn(redlimit::scope(store.clone(), job("panic", Some(started), until)));
    started_rx.await.unwrap();
    assert!(!redlimit::scope(store.clone(), job_passes("panic")).await, "held while the body runs");
    assert!(tell.send(End::Panic).is_ok());
    assert!(task.await.unwrap_err().is_panic(), "the body panicked");
    assert!(freed("panic").await, "{release:?}: given back when the body panicked");

    // And a body that returns, for comparison.
    let (started, started_rx) = oneshot::channel();
    let (tell, until) = oneshot::channel();
    let task = tokio::spawn(redlimit::scope(store.clone(), job("return", Some(started), until)));
    started_rx.await.unwrap();
    assert!(!redlimit::scope(store.clone(), job_passes("return")).await, "held while the body runs");
    assert!(tell.send(End::Return).is_ok());
    assert!(task.await.unwrap().is_ok());
    assert!(freed("return").await, "{release:?}: given back when the body returned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_longer_than_its_lease_keeps_its_permit_in_memory() {
    a_body_longer_than_its_lease_keeps_its_permit(Store::memory(), Release::AtOnce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_bodies_give_their_permits_back_in_memory() {
    stopped_bodies_give_their_permits_back(Store::memory(), Release::AtOnce).await;
}

/// The memory store decides at once, then the call spends the task's
/// cooperative budget and, when it is spent, yields: a call dropped there
/// (a `select!` or `timeout` whose other side is ready) took a permit no
/// `Permit` owns, so nobody gives it back before its lease ends.
#[tokio::test(flavor = "current_thread")]
async fn a_memory_acquisition_dropped_as_it_yields_leaves_no_permit_held() {
    use futures_util::FutureExt;
    let limiter = Limiter::new("permits.budget", Policy::concurrency(1, "60s").unwrap(), &Store::memory());
    let mut spent = 0;
    while tokio::task::coop::consume_budget().now_or_never().is_some() {
        spent += 1;
        assert!(spent < 100_000, "tokio's cooperative budget never ran out");
    }
    let dropped = limiter.acquire("k").now_or_never();
    assert!(dropped.is_none(), "with the budget spent, the acquisition yields after deciding: {dropped:?}");
    tokio::task::yield_now().await;
    assert!(limiter.acquire("k").await.is_ok(), "the dropped acquisition's permit is held until its lease ends");
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use redlimit::{OnError, RedisOptions};
    use redlimit_test_support::redis_server::RedisServer;

    /// A store that waits long for Redis: on a loaded machine a call that
    /// timed out would be let through holding nothing (the default
    /// `on_error`), which is not what these tests look at.
    async fn patient_store(server: &RedisServer) -> Store {
        let options = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
        Store::redis_with(&server.url(), options).await.unwrap()
    }

    /// Freezes (`-STOP`) or thaws (`-CONT`) the server.
    fn signal(server: &RedisServer, which: &str) {
        let pid = server.pid().unwrap().to_string();
        assert!(std::process::Command::new("kill").args([which, &pid]).status().unwrap().success());
    }

    /// The leases held in Redis, on every concurrency key.
    async fn leases_held(server: &RedisServer) -> usize {
        let client = redis::Client::open(server.url()).unwrap();
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
        let mut con = client.get_multiplexed_async_connection_with_config(&config).await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("redlimit:concurrency*").query_async(&mut con).await.unwrap();
        let mut held = 0;
        for key in keys {
            let leases: usize = redis::cmd("ZCOUNT").arg(&key).arg(1).arg("+inf").query_async(&mut con).await.unwrap();
            held += leases;
        }
        held
    }

    /// A limit of 1 with a lease far longer than the test, on a store that
    /// waits `response_timeout` for Redis, its permit already taken and given
    /// back once (the script is loaded and the connection up).
    async fn warmed_up(server: &RedisServer, name: &str, response_timeout: Duration) -> Limiter {
        let options = RedisOptions::default().with_response_timeout(response_timeout);
        let store = Store::redis_with(&server.url(), options).await.unwrap();
        let limiter = Limiter::new(name, Policy::concurrency(1, "60s").unwrap(), &store);
        limiter.acquire("k").await.unwrap().release().await.unwrap();
        limiter
    }

    /// An acquisition dropped while its script is on its way to Redis (the
    /// server frozen): the script still runs once Redis thaws, and takes a
    /// permit no `Permit` owns, so nobody renews or gives it back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_acquisition_dropped_in_flight_leaves_no_permit_held() {
        let server = RedisServer::start();
        let limiter = warmed_up(&server, "permits.dropped_in_flight", Duration::from_secs(10)).await;
        signal(&server, "-STOP");
        let dropped = tokio::time::timeout(Duration::from_millis(300), limiter.acquire("k")).await;
        signal(&server, "-CONT");
        assert!(dropped.is_err(), "Redis was frozen: {dropped:?}");
        let again = || async { limiter.acquire("k").await.is_ok() };
        if !passes(Release::Soon, again).await {
            let held = leases_held(&server).await;
            panic!("the dropped acquisition's permit is held until its lease ends: {held} lease(s) in Redis");
        }
    }

    /// An acquisition whose answer comes after the response timeout: the
    /// call fails (here `OnError::Deny` denies it), yet the script ran.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_acquisition_that_timed_out_leaves_no_permit_held() {
        let server = RedisServer::start();
        let limiter = warmed_up(&server, "permits.timed_out", Duration::from_millis(200)).await;
        let limiter = limiter.with_on_error(OnError::Deny);
        signal(&server, "-STOP");
        let timed_out = limiter.acquire("k").await;
        signal(&server, "-CONT");
        assert!(timed_out.is_err(), "Redis was frozen: {timed_out:?}");
        let again = || async { limiter.acquire("k").await.is_ok() };
        if !passes(Release::Soon, again).await {
            let held = leases_held(&server).await;
            panic!("the timed-out acquisition's permit is held until its lease ends: {held} lease(s) in Redis");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_longer_than_its_lease_keeps_its_permit_on_redis() {
        let server = RedisServer::start();
        let store = patient_store(&server).await;
        a_body_longer_than_its_lease_keeps_its_permit(store, Release::Soon).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stopped_bodies_give_their_permits_back_on_redis() {
        let server = RedisServer::start();
        let store = patient_store(&server).await;
        stopped_bodies_give_their_permits_back(store, Release::Soon).await;
    }
}
