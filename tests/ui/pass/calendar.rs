use redlimit::{rate_limit, RateLimited};

/// A thousand calls per Paris day and twenty thousand per Paris month, and ten a second.
#[rate_limit(algo = "fixed_window", key = "<user>", strategies = "1000/1d@Europe/Paris,20000/1mo@Europe/Paris,10/1s")]
async fn export(user: u64) -> Result<u64, RateLimited> {
    Ok(user)
}

fn main() {
    let _ = export(7);
}
