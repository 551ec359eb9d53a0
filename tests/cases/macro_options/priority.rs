//! `headroom` and `priority`: each call is decided as the class its
//! argument names, by its class's share of the limit, against one count.

use super::{denied, on_global_store};
use redlimit::{rate_limit, Policy, Priority, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 50%, normal 20%", priority = class, key = "<tenant>")]
async fn export(tenant: &str, class: Priority) -> Result<(), RateLimited> {
    Ok(())
}

pub struct Job {
    pub tenant: u32,
    pub class: Option<Priority>,
}

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1h", headroom = "low 50%", priority = job.class, key = "<job.tenant>")]
async fn run(job: &Job) -> Result<(), RateLimited> {
    Ok(())
}

fn plan() -> &'static Policy {
    static PLAN: std::sync::LazyLock<Policy> =
        std::sync::LazyLock::new(|| "gcra 1/1h burst 9 headroom low 50% normal 20%".parse().unwrap());
    &PLAN
}

#[rate_limit(policy = plan(), priority = class, key = "<tenant>", name = "macro_options::priority::per_call")]
async fn search(tenant: &str, class: &Priority) -> Result<(), RateLimited> {
    Ok(())
}

/// How many of 30 calls pass.
async fn passes<F: std::future::Future<Output = Result<(), RateLimited>>>(mut call: impl FnMut() -> F) -> u32 {
    let mut passed = 0;
    for _ in 0..30 {
        passed += call().await.is_ok() as u32;
    }
    passed
}

#[test]
fn each_class_gets_its_share_of_the_attributes_policy() {
    on_global_store(async {
        let mut passed = [0; 3];
        for (at, class) in Priority::ALL.into_iter().enumerate() {
            passed[at] = passes(|| export("acme", class)).await;
        }
        assert_eq!(passed, [5, 3, 2]);
        let d = denied(export("acme", Priority::Low).await);
        assert_eq!((d.decision().limit, d.decision().remaining), (5, 0), "the denial states its own class");
    });
}

#[test]
fn a_class_from_a_field_and_none_for_normal() {
    on_global_store(async {
        let [low, none, critical] =
            [Some(Priority::Low), None, Some(Priority::Critical)].map(|class| Job { tenant: 7, class });
        assert_eq!(passes(|| run(&low)).await, 5);
        assert_eq!(passes(|| run(&none)).await, 5, "normal keeps nothing here");
        assert_eq!(passes(|| run(&critical)).await, 0);
    });
}

#[test]
fn a_per_call_policy_brings_its_headroom() {
    on_global_store(async {
        let mut passed = [0; 3];
        for (at, class) in Priority::ALL.into_iter().enumerate() {
            passed[at] = passes(|| async move { search("acme", &class).await }).await;
        }
        assert_eq!(passed, [5, 3, 2]);
    });
}
