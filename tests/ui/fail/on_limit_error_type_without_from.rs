use redlimit::rate_limit;

#[derive(Debug)]
struct ApiError;

#[rate_limit(algo = "gcra", rate = "1/1s")]
async fn profile() -> Result<u32, ApiError> { Ok(1) }

fn main() {}
