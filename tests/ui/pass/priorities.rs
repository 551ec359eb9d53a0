//! `headroom` and `priority`: a class from an argument, a field, an
//! `Option`, a reference; with a configured or per-call policy, `priority` alone.

use redlimit::{rate_limit, Policy, Priority, RateLimited};

#[rate_limit(algo = "sliding_window", strategies = "10/1s", headroom = "low 50%, normal 20%", priority = class)]
async fn by_value(class: Priority) -> Result<(), RateLimited> { Ok(()) }

struct Job {
    class: Option<Priority>,
}

#[rate_limit(algo = "concurrency", limit = 4, headroom = "normal 25%", priority = job.class)]
async fn by_field(job: &Job) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = "uploads", priority = class)]
async fn configured(class: &Priority) -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = plan, priority = class)]
async fn per_call(plan: &Policy, class: Priority) -> Result<(), RateLimited> { Ok(()) }

fn main() {
    let _ = (by_value(Priority::Low), by_field(&Job { class: None }), configured(&Priority::Critical));
    let _ = per_call;
}
