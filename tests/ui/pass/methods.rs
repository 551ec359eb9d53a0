//! Methods taking `&self`, `&mut self`, `self` and `self: Box<Self>`, with
//! `<self.field>` in keys and `Self` in the return type.
use redlimit::{rate_limit, RateLimited};

struct Tenant {
    id: String,
    calls: u32,
}

impl Tenant {
    #[rate_limit(algo = "fixed_window", strategies = "1/1m", key = "tenant:<self.id>")]
    async fn by_ref(&self, page: u32) -> Result<u32, RateLimited> {
        Ok(page)
    }

    #[rate_limit(algo = "fixed_window", strategies = "1/1m", key = "tenant:<self.id>/<page>")]
    async fn by_mut(&mut self, page: u32) -> Result<u32, RateLimited> {
        self.calls += 1;
        Ok(self.calls + page)
    }

    #[rate_limit(algo = "token_bucket", capacity = 1, rate = "1/1m", key = "<self.id>")]
    async fn by_value(self) -> Result<Self, RateLimited> {
        Ok(self)
    }

    #[rate_limit(algo = "gcra", rate = "1/1m")]
    async fn boxed(self: Box<Self>) -> Result<Box<Self>, RateLimited> {
        Ok(self)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut t = Tenant { id: "acme".into(), calls: 0 };
    assert_eq!(t.by_ref(3).await.unwrap(), 3);
    assert!(t.by_ref(3).await.is_err());
    assert_eq!(t.by_mut(1).await.unwrap(), 2);
    assert!(t.by_mut(1).await.is_err());
    let t = t.by_value().await.unwrap();
    let t = Box::new(t).boxed().await.unwrap();
    assert!(t.boxed().await.is_err());
}
