//! `Limiter` on both stores: every algorithm's conventions, parity of the
//! memory twin with the Lua scripts, redis-cell's GCRA, quotas, atomicity
//! under concurrency, concurrency limiters held only through `acquire`, the
//! deny cache, constructors and hostile input, a
//! policy per call, denial texts, policies as text, dry-run trials, bucket refunds,
//! calendar windows and reservations settled.
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test limiter` runs them, `cargo test --test limiter MODULE::` one module.

#[cfg(feature = "redis")]
mod bucket_refunds_late;
#[cfg(feature = "redis")]
mod calendar;
#[cfg(feature = "redis")]
mod concurrency;
#[cfg(feature = "redis")]
mod concurrency_misuse;
#[cfg(feature = "redis")]
mod constructors;
#[cfg(feature = "redis")]
mod conventions;
mod denial_texts;
#[cfg(feature = "redis")]
mod deny_cache;
#[cfg(feature = "redis")]
mod dry_run_trial_count;
#[cfg(feature = "redis")]
mod gcra_cell;
#[cfg(feature = "redis")]
mod hostile_keys;
#[cfg(feature = "redis")]
mod hostile_numbers;
#[cfg(feature = "redis")]
mod interval_refill;
#[cfg(feature = "redis")]
mod parity;
#[cfg(feature = "redis")]
mod policy_per_call;
mod policy_text;
#[cfg(feature = "redis")]
mod quotas;
#[cfg(feature = "redis")]
mod settle;
