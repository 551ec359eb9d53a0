#![cfg(feature = "redis")]
//! `#[rate_limit(headroom = "...", priority = <argument>)]`: each call is
//! decided as the class its argument names, on both stores (each in a
//! scope), and a configured or per-call policy brings its own headroom.
//!
//! `cargo test --test macro_priorities`

use redlimit::{rate_limit, Policy, Priority, RateLimited, Store};
use redlimit_test_support::stores::BothStores;

#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 50%, normal 20%", priority = class, key = "<tenant>")]
async fn export(tenant: &str, class: Priority) -> Result<(), RateLimited> {
    Ok(())
}

struct Job {
    tenant: u32,
    class: Option<Priority>,
}

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1h", headroom = "low 50%", priority = job.class, key = "<job.tenant>")]
async fn run(job: &Job) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(policy = "uploads", priority = class, key = "<tenant>")]
async fn upload(tenant: &str, class: Priority) -> Result<(), RateLimited> {
    Ok(())
}

fn plan() -> &'static Policy {
    static PLAN: std::sync::LazyLock<Policy> =
        std::sync::LazyLock::new(|| "gcra 1/1h burst 9 headroom low 50% normal 20%".parse().unwrap());
    &PLAN
}

#[rate_limit(policy = plan(), priority = class, key = "<tenant>", name = "per-call")]
async fn search(tenant: &str, class: &Priority) -> Result<(), RateLimited> {
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
async fn each_call_is_decided_as_its_arguments_class_on_both_stores() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        redlimit::scope(store.clone(), async {
            assert_eq!(each_class(|class| export("acme", class)).await, [5, 3, 2], "{store_name}");
            let denied = export("acme", Priority::Low).await.unwrap_err();
            assert_eq!((denied.decision().limit, denied.decision().remaining), (5, 0), "{store_name}: its own class");

            let [low, none, critical] =
                [Some(Priority::Low), None, Some(Priority::Critical)].map(|class| Job { tenant: 7, class });
            assert_eq!(passes(|| run(&low)).await, 5, "{store_name}");
            assert_eq!(passes(|| run(&none)).await, 5, "{store_name}: no class is normal, which keeps nothing here");
            assert_eq!(passes(|| run(&critical)).await, 0, "{store_name}");

            assert_eq!(
                each_class(|class| async move { search("acme", &class).await }).await,
                [5, 3, 2],
                "{store_name}"
            );
        })
        .await;
    }
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
