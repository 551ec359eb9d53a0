//! `Limiter::acquire` and `acquire_wait` in one process: waiting for a
//! permit (woken by a release here, bounded by `max_wait`), `on_error` and
//! dry run on a permit, the gauge of permits held, and a rate policy's
//! permit, which was spent when taken.

use redlimit::observe::{PERMITS_HELD, PERMIT_LEASES_LOST_TOTAL};
use redlimit::{DenialReason, Limiter, ManualClock, Policy, Store};
use redlimit_test_support::metrics_capture;
use std::time::Duration;

fn concurrency(limit: u64) -> Policy {
    Policy::concurrency(limit, "30s").unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_waiting_acquisition_is_woken_by_a_release_and_bounded_by_its_maximum() {
    let limiter = Limiter::new("waits", concurrency(1), &Store::memory());
    let held = limiter.acquire("k").await.unwrap();

    let started = tokio::time::Instant::now();
    let denied = limiter.acquire_wait("k", Some(Duration::from_secs(2))).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(2), "waited its whole maximum");
    assert_eq!((denied.reason(), denied.decision().remaining), (DenialReason::Limited, 0));

    let waiter = tokio::spawn({
        let limiter = limiter.clone();
        async move { limiter.acquire_wait("k", None).await.map(|permit| permit.is_held()) }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!waiter.is_finished(), "no permit came back: still waiting");
    let released_at = tokio::time::Instant::now();
    drop(held);
    assert!(waiter.await.unwrap().unwrap());
    assert_eq!(released_at.elapsed(), Duration::ZERO, "woken by the release, not by its next try");
}

#[tokio::test]
async fn a_dry_run_lets_a_denied_acquisition_through_holding_nothing() {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("dry", concurrency(1), &store).with_dry_run(true);
    let first = limiter.acquire("k").await.unwrap();
    let second = limiter.acquire("k").await.expect("a dry run never denies");
    assert!(first.is_held() && !second.is_held());
    assert!(!second.decision().allowed, "the decision still says it would have denied");
}

#[tokio::test]
async fn a_rate_policy_permit_was_spent_when_taken() {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("spent", Policy::fixed_window("2/1m").unwrap(), &store);
    let permit = limiter.acquire("k").await.unwrap();
    assert!(!permit.is_held());
    drop(permit);
    assert_eq!(limiter.acquire("k").await.unwrap().decision().remaining, 0, "the drop gave nothing back");
    assert!(limiter.acquire("k").await.is_err());
}

#[tokio::test]
async fn the_gauge_counts_the_permits_this_process_holds() {
    drop(metrics_capture::recorded()); // installed before the limiter registers its metrics
    let limiter = Limiter::new("gauged", concurrency(3), &Store::memory());
    let held = |expected: f64| {
        assert_eq!(metrics_capture::gauge(PERMITS_HELD, &[("limiter", "gauged")]), Some(expected));
    };
    let (one, two) = (limiter.acquire("a").await.unwrap(), limiter.acquire("b").await.unwrap());
    held(2.0);
    drop(one);
    held(1.0);
    two.release().await.unwrap();
    held(0.0);
    assert_eq!(metrics_capture::counter(PERMIT_LEASES_LOST_TOTAL, &[("limiter", "gauged")]), 0);
}

#[cfg(feature = "redis")]
mod on_error {
    use super::*;
    use redlimit::OnError;
    use redlimit_test_support::redis_server::RedisServer;

    /// A store on a Redis that is gone.
    async fn gone() -> (RedisServer, Store) {
        let mut server = RedisServer::start();
        let store = Store::redis(&server.url()).await.unwrap();
        server.kill();
        (server, store)
    }

    #[tokio::test]
    async fn a_store_that_cannot_answer_is_settled_by_on_error() {
        let (_server, store) = gone().await;
        let open = Limiter::new("open", concurrency(1), &store);
        for _ in 0..3 {
            let permit = open.acquire("k").await.expect("on_error = allow lets it through");
            assert!(!permit.is_held(), "nothing was taken anywhere");
        }
        let closed = Limiter::new("closed", concurrency(1), &store).with_on_error(OnError::Deny);
        assert_eq!(closed.acquire("k").await.unwrap_err().reason(), DenialReason::StoreUnavailable);

        // Local: this process's memory holds the permit, and takes it back.
        let local = Limiter::new("local", concurrency(1), &store).with_on_error(OnError::Local);
        let permit = local.acquire("k").await.unwrap();
        assert!(permit.is_held());
        assert_eq!(local.acquire("k").await.unwrap_err().reason(), DenialReason::Limited);
        drop(permit);
        assert!(local.acquire("k").await.unwrap().is_held(), "given back to the memory that held it");
        assert!(local.store_errors() >= 3);
    }
}
