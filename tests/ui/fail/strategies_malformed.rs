use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "10/1x")]
async fn bad_unit() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "0/1s")]
async fn zero_limit() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "10/0s")]
async fn zero_window() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "10")]
async fn no_slash() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "")]
async fn empty() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
