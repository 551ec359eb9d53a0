use redlimit::rate_limit;

async fn too_few() -> Option<String> { None }
async fn wrong_output(_: u64, _: bool) -> String { String::new() }
fn not_async(_: u64, _: bool) -> Option<String> { None }

#[rate_limit(algo = "gcra", rate = "1/1s", fallback = too_few)]
async fn a(user: u64, verbose: bool) -> Option<String> { None }

#[rate_limit(algo = "gcra", rate = "1/1s", fallback = wrong_output)]
async fn b(user: u64, verbose: bool) -> Option<String> { None }

#[rate_limit(algo = "gcra", rate = "1/1s", fallback = not_async)]
async fn c(user: u64, verbose: bool) -> Option<String> { None }

fn main() {}
