//! `key`: `<arg>`, `<arg.field>`, `<self.field>`; values are escaped, so two
//! arguments can never make the same key.

use super::{denied, on_global_store};
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "user:<user_id>")]
async fn per_user(user_id: u64) -> Result<u64, RateLimited> {
    Ok(user_id)
}

#[test]
fn each_key_has_its_own_limit() {
    on_global_store(async {
        assert_eq!(per_user(1).await.unwrap(), 1);
        assert_eq!(per_user(2).await.unwrap(), 2);
        assert_eq!(denied(per_user(1).await).key(), "user:1");
        assert_eq!(denied(per_user(2).await).key(), "user:2");
    });
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<a>:<b>")]
async fn pair(a: &str, b: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn two_arguments_cannot_collide() {
    on_global_store(async {
        pair("x:y", "z").await.unwrap();
        // Unescaped, both would be "x:y:z" and this call would be denied.
        pair("x", "y:z").await.unwrap();
        assert_eq!(denied(pair("x:y", "z").await).key(), "x%3Ay:z");
        assert_eq!(denied(pair("x", "y:z").await).key(), "x:y%3Az");
        // Non-ASCII text is kept as is; ASCII punctuation (and `%`) is escaped.
        pair("é%", "{}").await.unwrap();
        assert_eq!(denied(pair("é%", "{}").await).key(), "é%25:%7B%7D");
    });
}

pub struct Request {
    pub user: User,
    pub path: &'static str,
}

pub struct User {
    pub id: u32,
}

pub struct Tenant {
    name: String,
}

impl Tenant {
    #[rate_limit(algo = "gcra", rate = "1/1h", key = "<self.name>/<req.user.id>/<req.path>")]
    async fn handle(&self, req: Request) -> Result<u32, RateLimited> {
        Ok(req.user.id)
    }
}

#[test]
fn fields_and_self_fields() {
    on_global_store(async {
        let acme = Tenant { name: "acme".into() };
        let req = |id| Request { user: User { id }, path: "/a" };
        assert_eq!(acme.handle(req(7)).await.unwrap(), 7);
        assert_eq!(denied(acme.handle(req(7)).await).key(), "acme/7/%2Fa");
        assert!(Tenant { name: "initech".into() }.handle(req(7)).await.is_ok());
    });
}

#[rate_limit(algo = "fixed_window", strategies = "2/1h")]
async fn whole_function(_user_id: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[test]
fn no_key_is_one_limit_for_the_function() {
    on_global_store(async {
        whole_function(1).await.unwrap();
        whole_function(2).await.unwrap();
        assert_eq!(denied(whole_function(3).await).key(), "");
    });
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<offset>:<count>:<id>")]
async fn integers(offset: i64, count: &u16, id: usize) -> Result<(), RateLimited> {
    Ok(())
}

/// Integer arguments skip `fmt`, but their keys are what `Display` and the
/// escaping give (a minus sign is `%2D`), as for any other argument.
#[test]
fn integer_arguments_read_as_their_display_text() {
    on_global_store(async {
        integers(-12, &0, usize::MAX).await.unwrap();
        assert_eq!(*denied(integers(-12, &0, usize::MAX).await).key(), format!("%2D12:0:{}", usize::MAX));
        integers(i64::MIN, &65535, 7).await.unwrap();
        assert_eq!(denied(integers(i64::MIN, &65535, 7).await).key(), "%2D9223372036854775808:65535:7");
    });
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "doc:<path>:<n>")]
async fn long(path: &str, n: u64) -> Result<(), RateLimited> {
    Ok(())
}

/// Generated code writes a short key in place; a longer one is kept whole,
/// escapes included, however far past that it goes.
#[test]
fn a_long_key_is_kept_whole() {
    on_global_store(async {
        let path = "a/".repeat(100);
        long(&path, 1).await.unwrap();
        // Differs from the first key only in its last byte.
        long(&path, 2).await.unwrap();
        assert_eq!(*denied(long(&path, 1).await).key(), format!("doc:{}:1", "a%2F".repeat(100)));
    });
}
