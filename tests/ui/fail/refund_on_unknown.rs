use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", refund_on = "error")]
async fn upload() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", refund_on = "5xx")]
async fn proxy() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", refund_on = true)]
async fn fetch() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", refund_on_err = true)]
async fn send() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
