#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, Policy, RateLimited};

#[rate_limit(policy = plan, algo = "gcra", rate = "1/1s")]
async fn inline_too(plan: &Policy) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = plan.clone(), strategies = "5/1m", key = "<user>")]
async fn strategies_too(user: u64, plan: &Policy) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
