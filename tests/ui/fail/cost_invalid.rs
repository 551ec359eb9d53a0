#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1s", cost = 11)]
async fn too_large() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1s", cost = weight)]
async fn not_an_argument(size: u32) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1s", cost = size)]
async fn signed(size: i32) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1s", cost = -1)]
async fn negative() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
