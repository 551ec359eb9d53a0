//! Generated code names everything by absolute path: a user's `mod core`,
//! `mod redlimit`, `type Result`, `String`, `Option`, `Site` and `Duration`
//! change nothing, and neither does a module without the prelude.
#![allow(dead_code, non_camel_case_types)]

mod core {}
mod redlimit {}
mod std {}

type Result = ();
type Option = ();
struct String;
struct Site;
struct Duration;
struct Policy;
fn push_key_value() {}
fn push_key_integer() {}
struct KeyInteger;
struct KeyBuf;

#[::redlimit::rate_limit(algo = "fixed_window", strategies = "1/1m", key = "<id>", on_limit = "wait", max_wait = "1ms")]
async fn limited(id: u32) -> ::core::result::Result<u32, ::redlimit::RateLimited> {
    let __redlimit_key = id; // a name like ours does not collide either
    Ok(__redlimit_key)
}

#[no_implicit_prelude]
mod bare {
    #[::redlimit::rate_limit(algo = "gcra", rate = "1/1m", cost = n, key = "<n>")]
    pub async fn limited(n: u8) -> ::core::result::Result<u8, ::redlimit::RateLimited> {
        ::core::result::Result::Ok(n)
    }
}

#[::tokio::main(flavor = "current_thread")]
async fn main() {
    ::std::assert_eq!(limited(1).await.unwrap(), 1);
    ::std::assert!(limited(1).await.is_err());
    ::std::assert_eq!(bare::limited(1).await.unwrap(), 1);
}
