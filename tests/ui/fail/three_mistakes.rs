// Three mistakes in one attribute: three errors in one build. The function
// is still emitted, so its callers compile and show no error of their own.
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "sliding_window", strategies = "10/1x", precison = "100ms", key = "<user>")]
async fn search(user_id: u64) -> Result<u64, RateLimited> { Ok(user_id) }

#[tokio::main]
async fn main() {
    let _ = search(1).await;
}
