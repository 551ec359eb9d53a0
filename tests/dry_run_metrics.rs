#![cfg(feature = "redis")]
//! A dry run is honest in metrics: what a limiter in dry run would have
//! denied is counted as `outcome="dry_run_denied"` in
//! `redlimit_decisions_total`, never as `denied`, so a denial-rate alert
//! stays quiet during a trial; `redlimit_dry_run_denials_total` counts the
//! calls it let through. The limiter's API, the attribute and the layer,
//! on both stores. (A binary of its own: it installs a metrics recorder.)

use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{rate_limit, Limiter, Policy, RateLimited};
use redlimit_test_support::http::{request, send};
use redlimit_test_support::metrics_capture::{counter, recorded};
use redlimit_test_support::stores::BothStores;

/// `(allowed, denied, dry_run_denied)` of `redlimit_decisions_total`, and `redlimit_dry_run_denials_total`, of `limiter`.
fn counts(limiter: &str) -> ((u64, u64, u64), u64) {
    let outcome = |outcome| counter("redlimit_decisions_total", &[("limiter", limiter), ("outcome", outcome)]);
    let let_through = counter("redlimit_dry_run_denials_total", &[("limiter", limiter)]);
    ((outcome("allowed"), outcome("denied"), outcome("dry_run_denied")), let_through)
}

#[tokio::test]
async fn a_limiter_in_dry_run_counts_no_denial() {
    drop(recorded());
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        let name = format!("dry_metrics_limiter_{at}");
        let trial = Limiter::new(name.as_str(), Policy::fixed_window("2/1m").unwrap(), store).with_dry_run(true);
        for _ in 0..4 {
            trial.limit("ann", 1).await.expect("a dry run never denies");
        }
        assert!(!trial.check("ann", 1).await.unwrap().allowed, "{at}: check reports as the store decides");
        assert_eq!(counts(&name), ((2, 0, 3), 2), "{at}: check lets nothing through, so only limit's are let through");
        // The same limiter enforced counts its denials as denials.
        let enforced = trial.with_dry_run(false);
        for _ in 0..3 {
            let _ = enforced.limit("ann", 1).await;
        }
        assert_eq!(counts(&name), ((4, 1, 3), 2), "{at}");
    }
}

#[rate_limit(name = "dry_metrics_fn", algo = "fixed_window", strategies = "1/1m", key = "<user>", dry_run = true)]
async fn export(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test]
async fn a_function_in_dry_run_counts_no_denial() {
    drop(recorded());
    let stores = BothStores::start().await;
    let mut seen = ((0, 0, 0), 0);
    for (at, store) in stores.each() {
        redlimit::scope(store.clone(), async {
            for _ in 0..3 {
                export("ann").await.expect("a dry run never denies");
            }
        })
        .await;
        let ((allowed, denied, dry_run_denied), let_through) = seen;
        seen = ((allowed + 1, denied, dry_run_denied + 2), let_through + 2);
        assert_eq!(counts("dry_metrics_fn"), seen, "{at}");
    }
}

#[tokio::test]
async fn a_layer_in_dry_run_counts_no_denial() {
    drop(recorded());
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        let name = format!("dry_metrics_layer_{at}");
        let limiter = Limiter::new(name.as_str(), Policy::fixed_window("1/1m").unwrap(), store);
        let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key").unwrap()).dry_run(true);
        let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
        for _ in 0..3 {
            assert_eq!(send(&mut app, request("/", &[("x-api-key", "k")])).await.status(), 200, "{at}");
        }
        assert_eq!(counts(&name), ((1, 0, 2), 2), "{at}");
    }
}
