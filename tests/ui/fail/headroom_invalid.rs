#![allow(unused_variables)] // the original functions are emitted as written

use redlimit::{rate_limit, Priority, RateLimited};

// More than the whole limit.
#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 120%", priority = class)]
async fn over(class: Priority) -> Result<(), RateLimited> { Ok(()) }

// Low calls must keep at least what normal ones keep.
#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "low 10%, normal 20%", priority = class)]
async fn inverted(class: Priority) -> Result<(), RateLimited> { Ok(()) }

// Half of a burst + 1 of 1 leaves low calls nothing.
#[rate_limit(algo = "gcra", rate = "1/1s", burst = 0, headroom = "low 50%", priority = class)]
async fn nothing_left(class: Priority) -> Result<(), RateLimited> { Ok(()) }

// Not a headroom.
#[rate_limit(algo = "fixed_window", strategies = "10/1m", headroom = "half", priority = class)]
async fn malformed(class: Priority) -> Result<(), RateLimited> { Ok(()) }

fn main() {}
