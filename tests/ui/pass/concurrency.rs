use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "concurrency", limit = 10, key = "tenant:<tenant>")]
async fn report(tenant: u64) -> Result<u64, RateLimited> {
    Ok(tenant)
}

#[rate_limit(algo = "concurrency", limit = 2, lease = "5s", on_limit = "wait", max_wait = "1s")]
async fn export() -> Result<(), RateLimited> {
    Ok(())
}

// Waits for a permit however long, so no denial reaches the caller.
#[rate_limit(algo = "concurrency", limit = 1, on_limit = "wait")]
async fn exclusive() {}

// A permit held across the body must keep the future `Send`.
fn spawnable() {
    fn send<T: Send>(_: T) {}
    send(report(1));
    send(exclusive());
}

fn main() {
    spawnable();
    let _ = export();
}
