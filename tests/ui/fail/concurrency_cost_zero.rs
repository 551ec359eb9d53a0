#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, RateLimited};

// A call holding no permit would run whatever the limit: the attribute refuses it.
#[rate_limit(algo = "concurrency", limit = 2, key = "tenant", cost = 0)]
async fn export(tenant: u32) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
