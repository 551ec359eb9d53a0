//! Several `#[rate_limit]` on one function: every limit applies, checked in
//! the order written (a call denied by the first takes nothing from the next).

use super::{denied, on_global_store};
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "sliding_log", strategies = "1/1h", key = "user:<user>", name = "stacked.user")]
#[rate_limit(algo = "sliding_log", strategies = "3/1h", name = "stacked.global")]
async fn search(user: &str) -> Result<&str, RateLimited> {
    Ok(user)
}

#[test]
fn per_user_then_global() {
    on_global_store(async {
        assert_eq!(search("ann").await.unwrap(), "ann");
        // Denied per user: the global limit is not asked, so it keeps its room.
        assert_eq!(denied(search("ann").await).limiter(), "stacked.user");
        assert_eq!(search("bob").await.unwrap(), "bob");
        assert_eq!(search("cy").await.unwrap(), "cy");
        // Three calls passed: the global limit is full for everyone.
        assert_eq!(denied(search("dee").await).limiter(), "stacked.global");
    });
}
