#![cfg(feature = "redis")]
//! `#[rate_limit(policy = "...", priority = <argument>)]`: a configured
//! policy brings its own headroom, on both stores (each in a scope). The
//! attribute's own `headroom` is in `tests/cases/macro_options/priority.rs`.
//!
//! `cargo test --test macro_priorities`

use redlimit::{rate_limit, Priority, RateLimited, Store};
use redlimit_test_support::stores::BothStores;

#[rate_limit(policy = "uploads", priority = class, key = "<tenant>")]
async fn upload(tenant: &str, class: Priority) -> Result<(), RateLimited> {
    Ok(())
}

async fn passes<F: std::future::Future<Output = Result<(), RateLimited>>>(mut call: impl FnMut() -> F) -> u32 {
    let mut passed = 0;
    for _ in 0..30 {
        passed += call().await.is_ok() as u32;
    }
    passed
}

async fn each_class<F: std::future::Future<Output = Result<(), RateLimited>>>(
    call: impl Fn(Priority) -> F,
) -> [u32; 3] {
    let mut passed = [0; 3];
    for (at, class) in Priority::ALL.into_iter().enumerate() {
        passed[at] = passes(|| call(class)).await;
    }
    passed
}

#[tokio::test]
async fn a_configured_policy_brings_its_headroom() {
    let both = BothStores::start().await;
    redlimit::policies::load_str(
        "policies.toml",
        "[policies.uploads]\nalgo = \"sliding_log\"\nstrategies = \"10/1m\"\nheadroom = \"low 50%, normal 20%\"\n",
    )
    .unwrap();
    for (store_name, store) in both.each() {
        let store: Store = store.clone();
        redlimit::scope(store, async {
            assert_eq!(each_class(|class| upload("acme", class)).await, [5, 3, 2], "{store_name}");
        })
        .await;
    }
}
