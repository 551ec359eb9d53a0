use redlimit::rate_limit;

#[rate_limit(algo = "gcra", rate = "1/1s")]
async fn count() -> u32 { 1 }

#[rate_limit(algo = "gcra", rate = "1/1s", on_limit = "error")]
async fn unit() {}

#[rate_limit(algo = "gcra", rate = "1/1s", on_limit = "wait", max_wait = "1s")]
async fn bounded_wait() -> () {}

fn main() {}
