//! `policy = "..."` with every other option a site can take: the policy
//! itself is looked up at run time.
use redlimit::{rate_limit, RateLimited};

#[rate_limit(policy = "search", key = "user:<user>")]
async fn search(user: u64) -> Result<u64, RateLimited> { Ok(user) }

#[rate_limit(policy = "search", name = "shared", cost = weight, on_error = "deny")]
async fn weighted(weight: u32) -> Result<u32, RateLimited> { Ok(weight) }

// No denial can reach the caller: any return type.
#[rate_limit(policy = "shaping", on_limit = "wait", on_error = "local")]
async fn shaped() -> u8 { 1 }

async fn cached(city: &str) -> String { format!("{city} (cached)") }

#[rate_limit(policy = "weather", key = "<city>", fallback = cached)]
async fn weather(city: &str) -> String { city.to_string() }

#[rate_limit(policy = "per_user", key = "<user>", name = "per_user")]
#[rate_limit(algo = "gcra", rate = "100/1s", name = "global")]
async fn stacked(user: u64) -> Result<(), RateLimited> { Ok(()) }

struct Service {
    id: u8,
}

impl Service {
    #[rate_limit(policy = "service-v2", key = "<self.id>")]
    async fn call(&self) -> Result<(), RateLimited> { Ok(()) }
}

fn main() {
    let service = Service { id: 1 };
    let _ = (search(1), weighted(1), shaped(), weather("Oslo"), stacked(1), service.call());
}
