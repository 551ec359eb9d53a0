use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s")]
fn blocking() -> Result<(), RateLimited> { Ok(()) }

fn main() {
    // The original function is still emitted: this call compiles.
    blocking().unwrap();
}
