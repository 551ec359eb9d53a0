use redlimit::rate_limit;

#[rate_limit(algo = "gcra", rate = "1/1s")]
struct Config;

trait Api {
    #[rate_limit(algo = "gcra", rate = "1/1s")]
    async fn get(&self);
}

fn main() {}
