//! `RateLimitLayer` and the HTTP fields: keys, controls, tiers, routes,
//! request costs, refunds, settlements, concurrency, proxies' headers, the exact fields
//! of every algorithm, a pacing client, and the `axum_server` example over
//! real HTTP. Those on the global store or the global policy set each have a
//! binary of their own (`http_*.rs`).
//!
//! One test binary for the area, one module per former test file (each
//! binary links the whole dependency tree, so fewer build much faster).
//! Only tests that leave process-wide state alone belong here: the global
//! store, the global policy set, the dry-run switch, the environment, a
//! global metrics recorder, allocation counting and child processes of the
//! test binary keep binaries of their own (`tests/*.rs`).
//!
//! `cargo test --test http` runs them, `cargo test --test http MODULE::` one module.

#[cfg(feature = "redis")]
mod axum_server;
mod concurrency;
mod controls;
#[cfg(feature = "redis")]
mod dry_run;
mod fields;
mod forwarded;
#[cfg(feature = "redis")]
mod layer;
mod pacing_client;
#[cfg(feature = "redis")]
mod refund_fields;
mod refunds;
mod request_cost;
#[cfg(feature = "redis")]
mod settle;
#[cfg(feature = "redis")]
mod stacked;
