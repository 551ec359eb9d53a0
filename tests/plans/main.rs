//! A key's state across a change of its policy: plans changed per call under
//! concurrency, fixed windows gaining and losing strategies, buckets'
//! capacities and rates changing, and sliding windows changing precision.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test plans` runs them, `cargo test --test plans MODULE::` one module.

#[cfg(feature = "redis")]
mod bucket_plan_change_moving;
#[cfg(feature = "redis")]
mod bucket_plan_change_parity;
#[cfg(feature = "redis")]
mod bucket_rate_change_retry;
#[cfg(feature = "redis")]
mod fixed_window_plan_change;
#[cfg(feature = "redis")]
mod plan_change;
#[cfg(feature = "redis")]
mod sliding_window_precision_change;
