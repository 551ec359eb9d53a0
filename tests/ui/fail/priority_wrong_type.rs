#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, RateLimited};

// The argument must hold a `redlimit::Priority`.
#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 50%", priority = class)]
async fn export(class: u8) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
