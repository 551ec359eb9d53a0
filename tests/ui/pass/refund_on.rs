//! `refund_on = "err"` with every way a call can be decided, on methods and
//! generics, with `?` and early returns in the body.
use redlimit::{rate_limit, Policy, RateLimited};

#[derive(Debug)]
enum Error {
    Limited,
    Io,
}

impl From<RateLimited> for Error {
    fn from(_: RateLimited) -> Self {
        Error::Limited
    }
}

struct Client;

impl Client {
    #[rate_limit(algo = "token_bucket", capacity = 5, rate = "1/1s", key = "<id>", cost = weight, refund_on = "err")]
    async fn call<T: std::fmt::Display>(&self, id: T, weight: u32) -> Result<u32, Error> {
        if weight > 3 {
            return Err(Error::Io);
        }
        let parsed: u32 = "7".parse().map_err(|_| Error::Io)?;
        Ok(parsed)
    }
}

#[rate_limit(algo = "fixed_window", strategies = "1/1s,10/1m", on_limit = "wait", refund_on = "err")]
async fn waits() -> Result<(), std::io::Error> { Ok(()) }

#[rate_limit(policy = "uploads", refund_on = "err")]
async fn named() -> Result<(), RateLimited> { Ok(()) }

fn plan(paid: bool) -> Policy {
    Policy::gcra(if paid { "10/1s" } else { "1/1s" }, 0).unwrap()
}

#[rate_limit(policy = plan(paid), refund_on = "err", on_limit = "wait")]
async fn per_call(paid: bool) -> Result<bool, Error> { Ok(paid) }

async fn cached() -> Result<u8, Error> { Ok(0) }

#[rate_limit(algo = "gcra", rate = "1/1s", name = "first", refund_on = "err")]
#[rate_limit(algo = "leaky_bucket", capacity = 2, rate = "1/1s", name = "second", fallback = cached)]
async fn stacked() -> Result<u8, Error> { Ok(1) }

fn main() {
    let _ = (Client.call(1, 1), waits(), named(), per_call(true), stacked());
}
