use redlimit::{rate_limit, Policy, RateLimited};

fn plan_policy(plan: &str) -> Policy {
    Policy::fixed_window(if plan == "pro" { "100/1m" } else { "10/1m" }).unwrap()
}

#[rate_limit(policy = plan_policy(&usr.plan), key = "<user.id>")]
async fn profile(user: User) -> Result<(), RateLimited> { Ok(()) }

pub struct User {
    id: u64,
    plan: String,
}

fn main() {}
