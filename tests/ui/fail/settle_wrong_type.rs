use redlimit::{rate_limit, RateLimited};

struct Completion { tokens: u64 }

// Reads the output, not the function's result.
fn tokens_used(completion: &Completion) -> u64 { completion.tokens }

#[rate_limit(algo = "token_bucket", capacity = 1000, rate = "1000/1m", cost = 100, settle = tokens_used)]
async fn complete() -> Result<Completion, RateLimited> { Ok(Completion { tokens: 7 }) }

// Returns a count that is not a cost.
fn words(_: &Result<Completion, RateLimited>) -> i32 { 1 }

#[rate_limit(algo = "gcra", rate = "10/1s", settle = words)]
async fn complete_again() -> Result<Completion, RateLimited> { Ok(Completion { tokens: 7 }) }

#[rate_limit(algo = "gcra", rate = "10/1s", settle = "words")]
async fn complete_quoted() -> Result<Completion, RateLimited> { Ok(Completion { tokens: 7 }) }

fn main() {}
