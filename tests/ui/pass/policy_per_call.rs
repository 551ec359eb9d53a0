//! `policy = <expression>`: a `Policy`, a `&Policy` or an `Arc<Policy>`,
//! computed per call from the arguments, with every other option a site
//! can take; each future is `Send`.
use redlimit::{rate_limit, Policy, RateLimited};
use std::sync::{Arc, LazyLock};

pub struct User {
    id: u64,
    plan: Arc<Policy>,
}

static FREE: LazyLock<Policy> = LazyLock::new(|| Policy::fixed_window("10/1m").unwrap());

fn owned(user: &User) -> Policy {
    Policy::fixed_window(if user.id == 0 { "1/1m" } else { "100/1m" }).unwrap()
}

#[rate_limit(policy = owned(&user), key = "user:<user.id>")]
async fn by_value(user: User) -> Result<u64, RateLimited> { Ok(user.id) }

#[rate_limit(policy = &*FREE, name = "free")]
async fn by_reference() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = user.plan.clone(), key = "<user.id>", cost = weight, on_error = "deny")]
async fn shared(user: &User, weight: u32) -> Result<u32, RateLimited> { Ok(weight) }

#[rate_limit(policy = policy, name = "given")]
async fn given(policy: &Policy) -> Result<(), RateLimited> { Ok(()) }

// A cost of 1 passes every policy once waited for: no denial reaches the caller.
#[rate_limit(policy = &user.plan, key = "<user.id>", on_limit = "wait", on_error = "local")]
async fn shaped(user: User) -> u64 { user.id }

#[rate_limit(policy = &user.plan, key = "<user.id>", on_limit = "wait", max_wait = "1s")]
async fn bounded(user: User) -> Result<u64, RateLimited> { Ok(user.id) }

async fn cached(user: User) -> String { format!("{} (cached)", user.id) }

// The policy borrows `user`, which the fallback then takes.
#[rate_limit(policy = &user.plan, key = "<user.id>", fallback = cached)]
async fn with_fallback(user: User) -> String { user.id.to_string() }

#[rate_limit(policy = user.plan.clone(), key = "<user.id>", name = "per_user")]
#[rate_limit(algo = "gcra", rate = "100/1s", name = "global")]
async fn stacked(user: &User) -> Result<(), RateLimited> { Ok(()) }

struct Service {
    tenant: u8,
    plan: Policy,
}

impl Service {
    #[rate_limit(policy = &self.plan, key = "<self.tenant>")]
    async fn call(&self) -> Result<(), RateLimited> { Ok(()) }
}

fn require_send<T: Send>(_: T) {}

fn main() {
    let user = || User { id: 1, plan: Arc::new(Policy::gcra("1/1s", 0).unwrap()) };
    let service = Service { tenant: 1, plan: Policy::gcra("1/1s", 0).unwrap() };
    let policy = Policy::gcra("1/1s", 0).unwrap();
    let u = user();
    require_send(by_value(user()));
    require_send(by_reference());
    require_send(shared(&u, 1));
    require_send(given(&policy));
    require_send(shaped(user()));
    require_send(bounded(user()));
    require_send(with_fallback(user()));
    require_send(stacked(&u));
    require_send(service.call());
}
