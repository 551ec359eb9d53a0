//! Stacked `#[rate_limit]`s: a call a later limit denies never runs its
//! body, so the earlier limits give back what they took for it (a rate
//! limit's permits; a concurrency permit comes back anyway). On the memory
//! store and on Redis, each through `redlimit::scope`.

use redlimit::{rate_limit, RateLimited};
use redlimit_test_support::stores::BothStores;
use tokio::sync::Semaphore;

#[rate_limit(name = "stacked.plan", algo = "fixed_window", strategies = "3/1m", key = "<user>")]
#[rate_limit(name = "stacked.burst", algo = "gcra", rate = "1/1m", key = "<user>")]
async fn search(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

/// The plan of `search` alone: the same limiter, so the same count.
#[rate_limit(name = "stacked.plan", algo = "fixed_window", strategies = "3/1m", key = "<user>")]
async fn plan(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(name = "stacked.exports", algo = "fixed_window", strategies = "2/1m", key = "<user>")]
#[rate_limit(name = "stacked.busy", algo = "concurrency", limit = 1, key = "<user>")]
async fn export(user: &str, started: &Semaphore, finish: &Semaphore) -> Result<(), RateLimited> {
    started.add_permits(1);
    finish.acquire().await.unwrap().forget();
    Ok(())
}

#[rate_limit(name = "stacked.exports", algo = "fixed_window", strategies = "2/1m", key = "<user>")]
async fn exports(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test]
async fn an_inner_rate_limit_denial_gives_the_outer_permit_back() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        redlimit::scope(store.clone(), async {
            search("ann").await.unwrap();
            for call in 0..4 {
                let denied = search("ann").await.unwrap_err();
                assert_eq!(denied.limiter(), "stacked.burst", "{at}, call {call}: never the plan");
            }
            // The plan spent one: two are left.
            plan("ann").await.unwrap();
            plan("ann").await.unwrap();
            assert_eq!(plan("ann").await.unwrap_err().limiter(), "stacked.plan", "{at}");
        })
        .await;
    }
}

#[tokio::test]
async fn a_concurrency_denial_gives_the_plan_permit_back() {
    let stores = BothStores::start().await;
    for (at, store) in stores.each() {
        redlimit::scope(store.clone(), async {
            let (started, finish) = (Semaphore::new(0), Semaphore::new(0));
            let first = export("ann", &started, &finish);
            let others = async {
                started.acquire().await.unwrap().forget();
                for call in 0..3 {
                    let denied = export("ann", &started, &finish).await.unwrap_err();
                    assert_eq!(denied.limiter(), "stacked.busy", "{at}, call {call}: the first is in flight");
                }
                finish.add_permits(1);
            };
            let (first, ()) = tokio::join!(first, others);
            first.unwrap();
            exports("ann").await.unwrap();
            assert_eq!(exports("ann").await.unwrap_err().limiter(), "stacked.exports", "{at}: one of two was spent");
        })
        .await;
    }
}
