#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, Policy, Priority, RateLimited};

// A configured policy has its own headroom.
#[rate_limit(policy = "uploads", headroom = "low 50%", priority = class)]
async fn upload(class: Priority) -> Result<(), RateLimited> { Ok(()) }

// So does each call's policy.
#[rate_limit(policy = plan, headroom = "low 50%", priority = class)]
async fn search(plan: &Policy, class: Priority) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
