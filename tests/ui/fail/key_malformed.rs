#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", key = "user:<user_id")]
async fn unclosed(user_id: u64) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", key = "user:<>")]
async fn empty_placeholder(user_id: u64) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", key = "")]
async fn empty(user_id: u64) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
