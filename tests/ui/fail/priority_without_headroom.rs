#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, Priority, RateLimited};

// The attribute's policy keeps no headroom: every class would decide alike.
#[rate_limit(algo = "fixed_window", strategies = "10/1m", priority = class)]
async fn export(class: Priority) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
