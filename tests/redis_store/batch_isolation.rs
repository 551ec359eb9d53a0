//! A batch decides each of its calls on its own: a call whose key holds
//! another type of value (another client wrote a list there) fails alone,
//! and every other call of its batch is answered and charged exactly as if
//! it had been sent alone. On one server a batch declares every key it
//! touches, as servers that lock or check declared keys need.

use redlimit::{Decision, Error, Limiter, ManualClock, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;

/// How many calls go at once; the first few go alone, the rest in batches.
const CALLS: usize = 40;
/// The call whose key holds a list: well inside a batch.
const BAD: usize = 25;

fn policies() -> [Policy; 4] {
    [
        Policy::gcra("10/1s", 4).unwrap(),
        Policy::sliding_log("5/1s,9/1m").unwrap(),
        Policy::fixed_window("5/1s").unwrap(),
        Policy::token_bucket(5, "1/1s").unwrap(),
    ]
}

/// Every call at once on a one-thread runtime (so they queue in order),
/// each on its own key, `BAD`'s storage key holding a list.
/// Returns each call's answer and how many script calls they took.
async fn all_at_once(
    server: &RedisServer,
    store: &Store,
    policy: &Policy,
    name: &str,
) -> (Vec<Result<Decision, Error>>, u64) {
    let mut admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let prefix = String::from_utf8(redlimit::__private::key_prefix("redlimit", policy, name)).unwrap();
    let _: () =
        redis::cmd("RPUSH").arg(format!("{prefix}:k{BAD}")).arg("not a limit").query_async(&mut admin).await.unwrap();
    let limiter = Limiter::new(name, policy.clone(), store).with_deny_cache(false);
    let before = server.evalsha_calls().await;
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.check(format!("k{i}"), 1 + (i % 3) as u64).await })
        })
        .collect();
    let mut answers = Vec::new();
    for call in calls {
        answers.push(call.await.unwrap());
    }
    let sent = server.evalsha_calls().await - before;
    // What each good key holds now: exactly its own call's permits.
    for (i, answer) in answers.iter().enumerate().filter(|(i, _)| *i != BAD) {
        let answer = answer.as_ref().unwrap_or_else(|e| panic!("{policy} ({name}): call {i} failed: {e}"));
        let peek = limiter.peek(format!("k{i}"), 0).await.unwrap();
        assert_eq!(peek.remaining, answer.remaining, "{policy}: k{i} charged once, by its own call");
    }
    (answers, sent)
}

#[tokio::test(flavor = "current_thread")]
async fn a_key_of_another_type_fails_its_own_call_and_no_other() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let url = server.url();
    let batched = Store::redis(&url).await.unwrap().with_clock(clock.clone());
    let alone = Store::redis_with(&url, RedisOptions::default().with_batching(false)).await.unwrap().with_clock(clock);
    for (index, policy) in policies().iter().enumerate() {
        let (in_batches, sent) = all_at_once(&server, &batched, policy, &format!("batched-{index}")).await;
        assert!(sent < CALLS as u64 / 2, "{policy}: {sent} script calls for {CALLS} calls: not batched");
        let (one_by_one, sent) = all_at_once(&server, &alone, policy, &format!("alone-{index}")).await;
        assert_eq!(sent, CALLS as u64, "{policy}: one script call each");
        for (i, (batched, alone)) in in_batches.iter().zip(&one_by_one).enumerate() {
            match (batched, alone) {
                (Ok(batched), Ok(alone)) => assert_eq!(batched, alone, "{policy}: call {i}"),
                (Err(Error::Server(batched)), Err(Error::Server(alone))) if i == BAD => {
                    assert!(batched.to_string().contains("WRONGTYPE"), "{policy}: {batched}");
                    assert!(alone.to_string().contains("WRONGTYPE"), "{policy}: {alone}");
                }
                other => panic!("{policy}: call {i}: {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_batch_on_one_server_declares_every_key() {
    let server = RedisServer::start();
    server.config_set("slowlog-log-slower-than", "0");
    server.config_set("slowlog-max-len", "1000");
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("declared", Policy::gcra("10/1s", 4).unwrap(), &store);
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.check(format!("k{i}"), 1).await.unwrap() })
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap().allowed);
    }
    let mut admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(1000).query_async(&mut admin).await.unwrap();
    let mut batches = 0;
    for entry in log {
        let redis::Value::Array(fields) = entry else { continue };
        let Some(redis::Value::Array(args)) = fields.get(3) else { continue };
        let args: Vec<String> = args
            .iter()
            .map(|a| match a {
                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        if args.first().map(String::as_str) != Some("EVALSHA") {
            continue;
        }
        let keys: usize = args[2].parse().unwrap();
        if keys > 1 {
            batches += 1;
            // The slow log keeps 31 arguments: every key among them is declared.
            for key in args.iter().skip(3).take(keys.min(28)) {
                assert!(key.starts_with("redlimit:gcra/v2:8:declared:k"), "{key} in {args:?}");
            }
        }
    }
    assert!(batches > 0, "no batch of several keys was sent");
}
