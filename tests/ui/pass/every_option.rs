//! Every algorithm and every option compiles, and each future is `Send`
//! (so it can be spawned on a multi-threaded runtime).
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "10/1s,100/1m")]
async fn fixed() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "sliding_window", strategies = "10/1s", precision = "100ms")]
async fn sliding() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "sliding_window", strategies = "10/1s,100/1m")]
async fn sliding_default_precision() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "sliding_log", strategies = "5/3s")]
async fn log() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/3s")]
async fn token() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "10/1m", refill = "interval")]
async fn token_by_interval() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "leaky_bucket", capacity = 10, rate = "5/1s")]
async fn leaky() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "10/1s", burst = 3)]
async fn gcra() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "50000/1s", prefetch = 100)]
async fn prefetched() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = "api", prefetch = 100)]
async fn prefetched_named() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(
    algo = "gcra",
    rate = "10/1s",
    key = "user:<user>",
    name = "api.search",
    cost = weight,
    on_limit = "wait",
    max_wait = "250ms",
    on_error = "local",
)]
async fn all_options(user: u64, weight: u32) -> Result<u64, RateLimited> { Ok(user + u64::from(weight)) }

async fn cached(user: u64) -> Option<u64> { Some(user) }

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<user>", fallback = cached, on_error = "deny")]
async fn with_fallback(user: u64) -> Option<u64> { None }

// No denial can reach the caller: any return type works.
#[rate_limit(algo = "leaky_bucket", capacity = 1, rate = "100/1s", on_limit = "wait")]
async fn shaped() {}

#[rate_limit(algo = "leaky_bucket", capacity = 1, rate = "100/1s", on_limit = "wait", cost = 1)]
async fn shaped_value(x: u8) -> u8 { x }

// An opaque type in the return type (no inference aid is emitted for it).
#[rate_limit(algo = "gcra", rate = "1/1s")]
async fn opaque() -> Result<impl std::fmt::Display, RateLimited> { Ok(5) }

// With tracing's attribute, above or below.
#[tracing::instrument]
#[rate_limit(algo = "gcra", rate = "1/1s")]
async fn instrumented_outside(x: u8) -> Result<u8, RateLimited> { Ok(x) }

#[rate_limit(algo = "gcra", rate = "1/1s")]
#[tracing::instrument]
async fn instrumented_inside(x: u8) -> Result<u8, RateLimited> { Ok(x) }

fn assert_send<T: Send>(_: &T) {}

#[tokio::main]
async fn main() {
    let futures = (fixed(), sliding(), sliding_default_precision(), log(), token(), leaky(), gcra(), all_options(1, 2), with_fallback(1), shaped(), shaped_value(1));
    assert_send(&futures);
    let (a, b, c, d, e, f, g, h, i, j, k) = futures;
    a.await.unwrap(); b.await.unwrap(); c.await.unwrap(); d.await.unwrap(); e.await.unwrap(); f.await.unwrap(); g.await.unwrap();
    assert_eq!(h.await.unwrap(), 3);
    assert_eq!(i.await, None);
    assert_eq!(with_fallback(1).await, Some(1), "denied: the fallback answers");
    j.await;
    assert_eq!(tokio::spawn(shaped_value(7)).await.unwrap(), 7);
    assert_eq!(k.await, 1);
    assert_eq!(opaque().await.unwrap().to_string(), "5");
    assert_eq!(instrumented_outside(1).await.unwrap() + instrumented_inside(2).await.unwrap(), 3);
}
