#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, RateLimited};

// Every call would be normal: the low headroom would never apply.
#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 50%")]
async fn export(tenant: u32) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
