//! `settle = path` on a free function, a method and a generic one, with the
//! estimate a literal or an argument, and a path through a module.
use redlimit::{rate_limit, RateLimited};

struct Completion {
    tokens: u64,
}

fn tokens_used(result: &Result<Completion, RateLimited>) -> u64 {
    result.as_ref().map_or(0, |c| c.tokens)
}

mod usage {
    pub fn bytes<T>(result: &Result<Vec<T>, redlimit::RateLimited>) -> u64 {
        result.as_ref().map_or(0, |v| v.len() as u64)
    }
}

#[rate_limit(algo = "token_bucket", capacity = 1000, rate = "1000/1m", key = "<api_key>", cost = estimate, settle = tokens_used)]
async fn complete(api_key: &str, estimate: u64) -> Result<Completion, RateLimited> {
    Ok(Completion { tokens: estimate + api_key.len() as u64 })
}

struct Gateway;

impl Gateway {
    #[rate_limit(algo = "fixed_window", strategies = "100/1m", cost = 10, settle = usage::bytes)]
    async fn download<T: Default + Clone>(&self, n: usize) -> Result<Vec<T>, RateLimited> {
        Ok(vec![T::default(); n])
    }
}

fn main() {
    let _ = complete("k", 1);
    let _ = Gateway.download::<u8>(3);
}
