//! Dry run (shadow mode): limits decided and recorded, never enforced. A
//! policy ([`Policy::with_dry_run`](crate::Policy::with_dry_run)), a limiter
//! ([`Limiter::with_dry_run`](crate::Limiter::with_dry_run)), and so an
//! attribute or a layer, or the whole process ([`set_dry_run`], or
//! `REDLIMIT_DRY_RUN=1`) can be in dry run.
//!
//! A policy or limiter in dry run is a trial, bound to keys of its own
//! (`key.rs`), so it never spends an enforced policy's count. The process's
//! switch trials the enforced policies themselves, on their own state.

use crate::Limiter;
use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that puts the whole process in dry run (`1` or
/// `true`), read at the first call that could deny.
pub const DRY_RUN_VAR: &str = "REDLIMIT_DRY_RUN";

const UNREAD: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;
static PROCESS: AtomicU8 = AtomicU8::new(UNREAD);

/// Puts every limiter of this process in dry run, or takes them out of it
/// (limiters and policies marked dry run stay so): decisions are made and
/// recorded as usual, and a call that would be denied passes, counted in
/// `redlimit_dry_run_denials_total` and logged. Overrides `REDLIMIT_DRY_RUN`.
///
/// Unlike a limiter's or policy's dry run, it keeps no state of its own:
/// the enforced policies count what passes, so switching it off enforces
/// at once, from those counts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, ManualClock, Policy, Store};
///
/// let limiter = Limiter::new("new-limit", Policy::fixed_window("1/1m")?, &Store::memory().with_clock(ManualClock::new()));
/// redlimit::set_dry_run(true);
/// limiter.limit("ann", 1).await.unwrap();
/// assert!(limiter.limit("ann", 1).await.is_ok(), "would have denied, passed");
/// redlimit::set_dry_run(false);
/// assert!(limiter.limit("ann", 1).await.is_err(), "enforced again, on the same count");
/// # Ok(()) }
/// ```
pub fn set_dry_run(on: bool) {
    PROCESS.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// Whether the whole process is in dry run ([`set_dry_run`], `REDLIMIT_DRY_RUN`).
pub fn is_dry_run() -> bool {
    match PROCESS.load(Ordering::Relaxed) {
        UNREAD => {
            let on = std::env::var(DRY_RUN_VAR).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
            // A `set_dry_run` made meanwhile wins.
            let _ = PROCESS.compare_exchange(UNREAD, if on { ON } else { OFF }, Ordering::Relaxed, Ordering::Relaxed);
            PROCESS.load(Ordering::Relaxed) == ON
        }
        state => state == ON,
    }
}

/// Records a call `limiter` would have denied and lets through: the metric,
/// a DEBUG event each time, and an INFO line at the limiter's first.
pub(crate) fn would_have_denied(limiter: &Limiter) {
    limiter.metrics().dry_run_denied();
    let name = &*limiter.inner.name;
    let algo = limiter.policy().algorithm().name();
    if !limiter.inner.dry_run_reported.swap(true, Ordering::Relaxed) {
        tracing::info!(target: "redlimit", limiter = name, algo, "dry run: this limiter would have denied a call and let it through; such calls are counted in redlimit_dry_run_denials_total");
    }
    tracing::debug!(target: "redlimit", limiter = name, algo, "dry run: would have denied");
}
