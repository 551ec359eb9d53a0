//! Pattern and reference arguments: every binding is usable in a key.
use redlimit::{rate_limit, RateLimited};

struct Point {
    x: i32,
    y: i32,
}

#[rate_limit(algo = "fixed_window", strategies = "1/1m", key = "<a>,<b>|<x>;<y>|<r>")]
async fn shapes((a, b): (u8, u8), Point { x, y }: Point, &r: &u64, _: bool, mut owned: String) -> Result<String, RateLimited> {
    owned.push('!');
    Ok(format!("{a}{b}{x}{y}{r}{owned}"))
}

#[rate_limit(algo = "fixed_window", strategies = "1/1m", key = "<name>/<list.0>")]
async fn references(name: &str, list: &(u32, u32), _unused: &mut Vec<u8>) -> Result<usize, RateLimited> {
    Ok(name.len() + list.1 as usize)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(shapes((1, 2), Point { x: 3, y: 4 }, &5, true, "s".into()).await.unwrap(), "12345s!");
    assert!(shapes((1, 2), Point { x: 3, y: 4 }, &5, false, "t".into()).await.is_err());
    assert_eq!(references("ab", &(1, 2), &mut Vec::new()).await.unwrap(), 4);
    assert!(references("ab", &(1, 9), &mut Vec::new()).await.is_err());
}
