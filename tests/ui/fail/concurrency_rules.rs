use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "concurrency", key = "tenant")]
async fn no_limit() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 0)]
async fn zero() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 10, lease = "2d")]
async fn long_lease() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 10, lease = "soon")]
async fn malformed_lease() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 10, rate = "1/1s")]
async fn a_rate() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", limit = 3, lease = "1s")]
async fn permits_on_a_rate() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 10, refund_on = "err")]
async fn refunded() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 2, cost = 3, on_limit = "wait")]
async fn too_heavy() {}

fn main() {}
