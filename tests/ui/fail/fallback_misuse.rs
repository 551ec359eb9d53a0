use redlimit::rate_limit;

async fn cached(_: (u8, u8)) -> u8 { 0 }

#[rate_limit(algo = "gcra", rate = "1/1s", fallback = cached)]
async fn pattern((a, b): (u8, u8)) -> u8 { a + b }

#[rate_limit(algo = "gcra", rate = "1/1s", fallback = cached, on_limit = "error")]
async fn conflict(pair: (u8, u8)) -> u8 { pair.0 }

fn main() {}
