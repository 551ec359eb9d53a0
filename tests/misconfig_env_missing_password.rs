#![cfg(feature = "redis")]
//! `init_from_env` with `REDLIMIT_REDIS_URL` naming a server that requires a
//! password, without one: start-up fails with `Error::Auth`, as for a wrong
//! password, and the global store left unset is not built on that Redis
//! later either (the lazy route meets the same refusal). Its own binary:
//! the environment and the global store are process-wide.
//!
//! `cargo test --test misconfig_env_missing_password`

use redlimit::{DenialReason, Error, REDIS_URL_VAR};
use redlimit_test_support::redis_server::{free_port, RedisServer};

#[path = "cases/env_sites.rs"]
mod sites;

#[tokio::test(flavor = "current_thread")]
async fn a_missing_password_fails_the_start_up_call() {
    let server = RedisServer::start_on(free_port, &["--appendonly", "no", "--requirepass", "s3cret-Pa55"], None);
    std::env::set_var(REDIS_URL_VAR, server.url());

    let error = redlimit::init_from_env().await.expect_err("no password, so start-up must fail");
    println!("{error}");
    assert!(matches!(error, Error::Auth(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot connect to Redis at {}: the credentials were refused", server.url())),
        "{error}"
    );

    // Without a start-up call the first limited call connects in the
    // background; each attempt is refused the same way and nothing is
    // decided on that Redis. Each `global` waits for at most one attempt.
    let mut last = None;
    for _ in 0..100 {
        match redlimit::global().await {
            Err(error @ Error::Auth(_)) => {
                last = Some(error);
                break;
            }
            Err(_) => continue,
            Ok(store) => panic!("a store was built without the password: {store:?}"),
        }
    }
    assert!(last.is_some(), "the background connect never reported the refusal");
    let denied = sites::deny().await.expect_err("on_error = deny denies while no store is built");
    assert_eq!(denied.reason(), DenialReason::StoreUnavailable);
}
