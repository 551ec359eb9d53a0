use redlimit::{rate_limit, Policy, RateLimited};

fn plan(user: u64) -> Option<Policy> {
    Policy::fixed_window(if user == 0 { "1/1m" } else { "5/1m" }).ok()
}

#[rate_limit(policy = plan(user), key = "<user>")]
async fn optional(user: u64) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = limit, key = "<user>")]
async fn a_number(user: u64, limit: u32) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
