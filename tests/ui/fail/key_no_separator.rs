#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, RateLimited};

// `("ab", "c")` and `("a", "bc")` would share a key.
#[rate_limit(algo = "gcra", rate = "1/1s", key = "<a><b>")]
async fn adjacent(a: String, b: String) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<a>and<b>")]
async fn letters(a: String, b: String) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<a>%<b>")]
async fn percent(a: String, b: String) -> Result<(), RateLimited> { Ok(()) }

// Values keep non-ASCII text as is, so it cannot separate them either.
#[rate_limit(algo = "gcra", rate = "1/1s", key = "<a>·<b>")]
async fn non_ascii(a: String, b: String) -> Result<(), RateLimited> { Ok(()) }

// Literal text before, after and around separated placeholders is fine.
#[rate_limit(algo = "gcra", rate = "1/1s", key = "user<a>-x-<b>end")]
async fn fine(a: String, b: String) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
