//! `#[rate_limit(dry_run = true)]`: the function's calls are decided and
//! counted, and one that would be denied runs the body anyway. It is a
//! trial: the same function without `dry_run` on the same store keeps its
//! own count, which the trial's calls never spend.

use redlimit::{rate_limit, ManualClock, RateLimited, Store};
use std::sync::atomic::{AtomicU32, Ordering};

static RAN: AtomicU32 = AtomicU32::new(0);

#[rate_limit(name = "export", algo = "fixed_window", strategies = "2/1h", key = "<user>", dry_run = true)]
async fn export_trial(user: &str) -> Result<(), RateLimited> {
    RAN.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[rate_limit(name = "export", algo = "fixed_window", strategies = "2/1h", key = "<user>")]
async fn export(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test]
async fn a_function_in_dry_run_runs_every_call_and_counts_them() {
    redlimit::scope(Store::memory().with_clock(ManualClock::new()), async {
        for _ in 0..4 {
            assert!(export_trial("ann").await.is_ok());
        }
        assert_eq!(RAN.load(Ordering::Relaxed), 4, "every body ran");
        assert!(export("ann").await.is_ok(), "the trial's calls spent none of the enforced 2");
        assert!(export("ann").await.is_ok());
        assert!(export("ann").await.is_err(), "enforced on its own count");
        assert!(export_trial("ann").await.is_ok(), "a dry run never denies");
        assert_eq!(RAN.load(Ordering::Relaxed), 5);
    })
    .await;
}
