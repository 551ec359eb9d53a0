use redlimit::rate_limit;

#[rate_limit(algo = "leaky_bucket", capacity = 1, rate = "1/1s", on_limit = "wait", refund_on = "err")]
async fn send(message: u32) -> u32 { message }

async fn cached(message: u32) -> Option<u32> { Some(message) }

#[rate_limit(algo = "gcra", rate = "1/1s", fallback = cached, refund_on = "err")]
async fn fetch(message: u32) -> Option<u32> { Some(message) }

fn main() {}
