//! After Redis loses its scripts (restart, failover, `SCRIPT FLUSH`), the
//! calls that meet `NOSCRIPT` at the same time wait for one reload of every
//! script bound on the backend instead of each sending its own `SCRIPT LOAD`.

use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::sync::Arc;
use tokio::sync::Barrier;

/// `SCRIPT LOAD` calls since the last `CONFIG RESETSTAT`.
async fn script_loads(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(con).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_script|load:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_calls_meeting_noscript_reload_the_scripts_once() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("reload", Policy::gcra("1000/1s", 999).unwrap(), &store).with_deny_cache(false);
    assert!(limiter.check("warm", 1).await.unwrap().allowed);
    // Two more policies bound on the same backend: reloaded with the first.
    for policy in [Policy::sliding_log("5/1s").unwrap(), Policy::token_bucket(5, "1/1s").unwrap()] {
        assert!(Limiter::new("other", policy, &store).check("warm", 1).await.unwrap().allowed);
    }

    let mut admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut admin).await.unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut admin).await.unwrap();

    // 64 calls at once, each of which meets NOSCRIPT first.
    let tasks = 64;
    let barrier = Arc::new(Barrier::new(tasks));
    let mut handles = Vec::new();
    for user in 0..tasks {
        let (limiter, barrier) = (limiter.clone(), barrier.clone());
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            limiter.check(format!("user:{user}"), 1).await
        }));
    }
    for handle in handles {
        assert!(handle.await.unwrap().expect("every call is answered after the reload").allowed);
    }

    let scripts = 3; // every script bound on this backend: the three policies' own
    let loads = script_loads(&mut admin).await;
    assert_eq!(loads % scripts, 0, "whole reloads only: {loads} SCRIPT LOADs");
    assert!((scripts..=2 * scripts).contains(&loads), "{loads} SCRIPT LOADs for {tasks} calls: expected one reload of {scripts} scripts (two at most, if a call's EVALSHA crossed the first)");

    // And the store keeps answering without loading anything again.
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut admin).await.unwrap();
    for user in 0..10 {
        assert!(limiter.check(format!("user:{user}"), 1).await.unwrap().allowed);
    }
    assert_eq!(script_loads(&mut admin).await, 0);
}
