// What `#[async_trait]` hands to the method attribute: a boxed future.
// (Written out by hand so the case needs no extra dependency.)
use redlimit::{rate_limit, RateLimited};
use std::future::Future;
use std::pin::Pin;

struct Api;

impl Api {
    #[rate_limit(algo = "gcra", rate = "1/1s")]
    fn get<'life0, 'async_trait>(&'life0 self) -> Pin<Box<dyn Future<Output = Result<(), RateLimited>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { Ok(()) })
    }
}

fn main() {}
