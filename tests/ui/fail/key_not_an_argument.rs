#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", key = "user:<usr_id>")]
async fn profile(user_id: u64, verbose: bool) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<request.user>")]
async fn nested(req: String) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<self.tenant>")]
async fn not_a_method(user_id: u64) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
