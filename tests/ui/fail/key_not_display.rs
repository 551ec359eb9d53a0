use redlimit::{rate_limit, RateLimited};

struct User {
    id: u64,
}

#[rate_limit(algo = "gcra", rate = "1/1s", key = "user:<user>")]
async fn profile(user: User) -> Result<u64, RateLimited> { Ok(user.id) }

fn main() {}
