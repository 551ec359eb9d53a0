//! `cost`: a literal or an argument; how many permits a call takes.

use super::{denied, on_global_store};
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "token_bucket", capacity = 5, rate = "1/1h", cost = 2)]
async fn heavy() -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn a_literal_cost() {
    on_global_store(async {
        heavy().await.unwrap();
        heavy().await.unwrap();
        let d = denied(heavy().await);
        assert_eq!(d.decision().remaining, 1, "5 - 2 - 2 left; a denied call takes nothing");
    });
}

pub struct Upload {
    pub bytes: u16,
}

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1h", key = "<user>", cost = upload.bytes)]
async fn upload(user: u8, upload: Upload) -> Result<u16, RateLimited> {
    Ok(upload.bytes)
}

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1h", key = "<user>", cost = n)]
async fn take(user: u8, n: usize) -> Result<usize, RateLimited> {
    Ok(n)
}

#[test]
fn a_cost_from_an_argument() {
    on_global_store(async {
        assert_eq!(upload(1, Upload { bytes: 7 }).await.unwrap(), 7);
        assert_eq!(denied(upload(1, Upload { bytes: 4 }).await).decision().remaining, 3);
        assert_eq!(upload(1, Upload { bytes: 3 }).await.unwrap(), 3);
        // Cost 0 takes nothing and passes even on an empty bucket.
        assert_eq!(take(2, 10).await.unwrap(), 10);
        assert_eq!(take(2, 0).await.unwrap(), 0);
        // More than the bucket holds can never pass, and says so.
        let d = denied(take(3, 11).await);
        assert!(d.decision().can_never_pass(), "{d}");
        assert!(d.to_string().contains("can never pass"), "{d}");
    });
}
