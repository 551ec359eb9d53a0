//! `lua/sliding_window.lua` driven directly: a steady call's commands and
//! bytes do not grow with the sub-windows its window holds, and every key
//! it writes gets a TTL.

use redis::aio::MultiplexedConnection;
use redlimit_test_support::redis_server::RedisServer;

const START: u64 = 1_767_225_600_000_000;

/// The script, and one policy's numbers as its calls send them.
fn script(precision: u64, strategies: &[(u64, u64)]) -> (redis::Script, Vec<u8>) {
    let (source, policy) = redlimit::__private::sliding_window_source(precision, strategies);
    (redis::Script::new(&source), policy)
}

/// One call of cost 1 with the runtime's ARGV: the policy, cost, then now
/// and the slack (none: Redis's clock).
async fn call(
    con: &mut MultiplexedConnection,
    (script, policy): &(redis::Script, Vec<u8>),
    key: &str,
    now: Option<u64>,
) -> Vec<i64> {
    let mut invocation = script.key(key);
    invocation.arg(policy.as_slice()).arg(1).arg(0);
    if let Some(now) = now {
        invocation.arg(now).arg(60_000);
    }
    let reply: Vec<u8> = invocation.invoke_async(con).await.unwrap();
    redlimit_test_support::redis_server::window_numbers(&reply)
}

async fn connect(server: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

/// The calls of each command `calls` makes.
async fn commands<F: std::future::Future<Output = ()>>(server: &RedisServer, calls: F) -> [u64; 5] {
    let names = ["get", "set", "getrange", "setrange", "pexpire"];
    let mut before = [0; 5];
    for (count, name) in before.iter_mut().zip(names) {
        *count = server.command_calls(name).await;
    }
    calls.await;
    let mut made = [0; 5];
    for ((count, name), was) in made.iter_mut().zip(names).zip(before) {
        *count = server.command_calls(name).await - was;
    }
    made
}

#[tokio::test]
async fn a_steady_calls_commands_do_not_grow_with_its_sub_windows() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    // A ring of a few sub-windows is read and written whole; a larger one
    // only in the bytes a call reads and changes.
    for (subs, per_call) in [(50, [1, 1, 0, 0, 0]), (1000, [0, 0, 2, 2, 1])] {
        let steady = script(1_000, &[(1 << 40, 1_000 * subs)]);
        let key = format!("steady{subs}");
        for n in 0..subs {
            call(&mut con, &steady, &key, Some(START + n * 1_000)).await;
        }
        let made = commands(&server, async {
            for n in subs..subs + 200 {
                let reply = call(&mut con, &steady, &key, Some(START + n * 1_000)).await;
                assert_eq!(reply[2], (1 << 40) - subs as i64, "{subs} hits in the window after each call");
            }
        })
        .await;
        assert_eq!(made, per_call.map(|n| 200 * n), "GET, SET, GETRANGE, SETRANGE, PEXPIRE at {subs} sub-windows");
        let len: u64 = redis::cmd("STRLEN").arg(&key).query_async(&mut con).await.unwrap();
        assert_eq!(len, 8 * (3 + 3 + 1 + subs), "k, n, x, the policy's numbers, a total, a ring of {subs}");
    }
}

#[tokio::test]
async fn with_the_server_clock_every_key_gets_a_ttl() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    // Windows of 10 s and more, so no pause of a busy machine outlives a key.
    let policies: [(u64, &[(u64, u64)]); 3] = [
        (100_000, &[(5, 60_000_000)]),
        (500_000, &[(4, 60_000_000), (10, 300_000_000)]),
        (1_000, &[(1000, 10_000_000)]),
    ];
    for (precision, strategies) in policies {
        let steady = script(precision, strategies);
        for _ in 0..5 {
            let reply = call(&mut con, &steady, "server-clock", None).await;
            // 7 fields, then a (remaining, reset, retry) triple per strategy when there are several.
            let k = strategies.len();
            assert_eq!(reply.len(), if k > 1 { 7 + 3 * k } else { 7 });
        }
        let ttl: i64 = redis::cmd("PTTL").arg("server-clock").query_async(&mut con).await.unwrap();
        assert!(ttl > 0, "no TTL ({ttl})");
        let _: () = redis::cmd("DEL").arg("server-clock").query_async(&mut con).await.unwrap();
    }
}

/// On Redis's clock a call whose recorded TTL already covers its reset
/// rewrites the state by SETRANGE, keeping the TTL: the counts stay exact,
/// and the key lives at most a second past its reset.
#[tokio::test]
async fn with_the_server_clock_calls_in_one_sub_window_count_exactly() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    // 5 per hour and 3 per 10 minutes, in sub-windows of a minute.
    let hourly = script(60_000_000, &[(5, 3_600_000_000), (3, 600_000_000)]);
    let mut remaining = Vec::new();
    for _ in 0..6 {
        let reply = call(&mut con, &hourly, "exact", None).await;
        remaining.push((reply[0], reply[7], reply[10]));
    }
    assert_eq!(remaining, [(1, 4, 2), (1, 3, 1), (1, 2, 0), (0, 2, 0), (0, 2, 0), (0, 2, 0)]);
    let ttl: i64 = redis::cmd("PTTL").arg("exact").query_async(&mut con).await.unwrap();
    assert!(ttl > 3_000_000 && ttl <= 3_601_000, "the TTL outlives the hour's reset, by at most a second: {ttl}");
}
