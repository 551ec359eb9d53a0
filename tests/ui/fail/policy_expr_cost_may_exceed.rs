#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, Policy};

// Any policy admits a cost of 1 once waited for, but not necessarily 5.
#[rate_limit(policy = plan, on_limit = "wait", cost = 5)]
async fn send(plan: &Policy) {}

fn main() {}
