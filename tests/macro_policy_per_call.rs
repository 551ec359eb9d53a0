//! `#[rate_limit(policy = <expression>)]`: one annotated function, each
//! call decided by the policy its arguments give, on the global store
//! (memory, one manual clock; its own test binary, since the global store
//! is set once per process).

use redlimit::{rate_limit, ManualClock, Policy, RateLimited, Store};
use std::sync::{Arc, LazyLock, Once};
use std::time::Duration;

#[derive(Clone, Copy)]
enum Plan {
    Free,
    Pro,
}

struct User {
    id: u64,
    plan: Plan,
}

static FREE: LazyLock<Policy> = LazyLock::new(|| Policy::fixed_window("2/1m").unwrap());
static PRO: LazyLock<Policy> = LazyLock::new(|| Policy::fixed_window("5/1m").unwrap());

fn plan_policy(plan: Plan) -> &'static Policy {
    match plan {
        Plan::Free => &FREE,
        Plan::Pro => &PRO,
    }
}

#[rate_limit(policy = plan_policy(user.plan), key = "user:<user.id>", name = "profiles")]
async fn profile(user: &User) -> Result<u64, RateLimited> {
    Ok(user.id)
}

/// The global store's clock, set once for this binary's tests.
fn clock() -> &'static ManualClock {
    static CLOCK: LazyLock<ManualClock> = LazyLock::new(ManualClock::new);
    static STORE: Once = Once::new();
    STORE.call_once(|| redlimit::init(Store::memory().with_clock(CLOCK.clone())).unwrap());
    &CLOCK
}

/// How many calls pass before the first denial, and that denial.
async fn passes(user: &User) -> (u32, RateLimited) {
    for passed in 0..100 {
        if let Err(denied) = profile(user).await {
            return (passed, denied);
        }
    }
    panic!("user {} was never denied", user.id);
}

#[tokio::test]
async fn each_caller_is_limited_by_its_own_policy_and_keeps_its_count_across_a_plan_change() {
    let clock = clock();
    let (mut ann, mut bob) = (User { id: 1, plan: Plan::Free }, User { id: 2, plan: Plan::Pro });

    let (passed, denied) = passes(&ann).await;
    assert_eq!((passed, denied.decision().limit, denied.policy()), (2, 2, Some(&*FREE)));
    assert_eq!(denied.limiter(), "profiles");
    assert_eq!(denied.key(), "user:1");
    let (passed, denied) = passes(&bob).await;
    assert_eq!((passed, denied.decision().limit, denied.policy()), (5, 5, Some(&*PRO)));

    // Ann upgrades: her 2 calls still count, so 3 of the 5 are left this minute.
    ann.plan = Plan::Pro;
    let (passed, denied) = passes(&ann).await;
    assert_eq!((passed, denied.decision().limit), (3, 5));
    // Bob downgrades with 5 used: denied at once under a limit of 2.
    bob.plan = Plan::Free;
    let denied = profile(&bob).await.unwrap_err();
    assert_eq!((denied.decision().limit, denied.decision().remaining), (2, 0));

    // A new window: each counts afresh under the plan they have now.
    clock.advance(Duration::from_secs(60));
    assert_eq!(passes(&ann).await.0, 5);
    assert_eq!(passes(&bob).await.0, 2);
}

#[rate_limit(policy = quota.clone(), key = "<tenant>", name = "tenants", cost = bytes)]
async fn upload(tenant: &str, quota: Arc<Policy>, bytes: u32) -> Result<u32, RateLimited> {
    Ok(bytes)
}

#[tokio::test]
async fn a_shared_policy_and_a_cost_read_from_an_argument() {
    clock();
    let quota = Arc::new(Policy::token_bucket(10, "1/1h").unwrap());
    assert_eq!(upload("acme", quota.clone(), 7).await.unwrap(), 7);
    let denied = upload("acme", quota.clone(), 4).await.unwrap_err();
    assert_eq!(denied.decision().remaining, 3);
    // More than this policy ever admits: never passes, and says so.
    assert!(upload("globex", quota, 11).await.unwrap_err().decision().can_never_pass());
}
