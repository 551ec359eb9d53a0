use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "1000/1d@Mars/Olympus")]
async fn unknown_zone() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "1000/2d@Europe/Paris")]
async fn two_days() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "1000/1h@Europe/Paris")]
async fn hour_unit() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "1000/1mo")]
async fn month_without_zone() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "sliding_log", strategies = "1000/1d@Europe/Paris")]
async fn other_algorithm() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
