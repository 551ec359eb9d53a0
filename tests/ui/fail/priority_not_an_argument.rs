#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, Priority, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 50%", priority = klass)]
async fn misspelt(class: Priority) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 50%", priority = "low")]
async fn literal(class: Priority) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
