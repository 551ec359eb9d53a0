//! The sliding log keeps one entry per admitted call, not per permit: a
//! call of a million permits costs Redis what a call of one does, and a
//! key holds at most 1 000 live entries (a call admitted into a full log joins
//! the newest entry). Both stores answer alike throughout; that the memory
//! store also keeps one entry per call is pinned in `src/algo/sliding_log.rs`.
//!
//! `cargo test --test redis_store sliding_log::` (needs `redis-server`)

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

/// The entries a key holds at most (`src/algo/sliding_log.rs`).
const MAX_ENTRIES: u64 = 1000;

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap()
}

/// The commands Redis ran while `call` ran, with how many times each (`INFO
/// commandstats` counts a script's own), less `INFO` (this reading's, and the
/// connection's check at most once a second) and `PING` (after an idle spell).
async fn commands_run<T>(con: &mut MultiplexedConnection, call: impl Future<Output = T>) -> (T, BTreeMap<String, u64>) {
    async fn counted(con: &mut MultiplexedConnection) -> BTreeMap<String, u64> {
        let info: String = redis::cmd("INFO").arg("commandstats").query_async(con).await.unwrap();
        info.lines()
            .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(":calls="))
            .map(|(command, rest)| (command.to_owned(), rest.split(',').next().unwrap().parse().unwrap()))
            .collect()
    }
    let before = counted(con).await;
    let output = call.await;
    let mut ran = counted(con).await;
    ran.retain(|command, calls| {
        *calls -= before.get(command).copied().unwrap_or(0);
        *calls > 0 && command != "ping" && command != "info"
    });
    (output, ran)
}

/// A stored log (`lua/sliding_log.lua`): its head `(lasts, base)` and its
/// entries `(at, through)`, 16-byte records of two little-endian doubles.
type Stored = ((f64, f64), Vec<(f64, f64)>);

async fn stored(con: &mut MultiplexedConnection, key: &str) -> Stored {
    let bytes: Vec<u8> = con.get(key).await.unwrap();
    assert!(!bytes.is_empty() && bytes.len().is_multiple_of(16), "{} bytes", bytes.len());
    let double = |at: usize| f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let records: Vec<(f64, f64)> = (0..bytes.len() / 16).map(|r| (double(16 * r), double(16 * r + 8))).collect();
    (records[0], records[1..].to_vec())
}

/// The storage key of `name`'s limiter for the user key `key`.
fn storage_key(name: &str, key: &str) -> String {
    format!("redlimit:sliding_log/v3:{}:{name}:{key}", name.len())
}

/// What a call did: the commands it ran, and the key's length after it.
type Work = (BTreeMap<String, u64>, u64);

/// Two admitted calls of `cost` on `key`.
async fn two_calls(admin: &mut MultiplexedConnection, limiter: &Limiter, key: &str, cost: u64) -> Vec<Work> {
    let mut work = Vec::new();
    for _ in 0..2 {
        let (decision, ran) = commands_run(admin, limiter.check(key, cost)).await;
        assert!(decision.unwrap().allowed, "{key}");
        work.push((ran, admin.strlen(storage_key(limiter.name(), key)).await.unwrap()));
    }
    work
}

#[tokio::test]
async fn a_call_of_a_million_permits_runs_the_commands_and_writes_the_bytes_of_a_call_of_one() {
    let server = RedisServer::start();
    let mut admin = connect(&server.url()).await;
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("victim", Policy::sliding_log("2000000/1m").unwrap(), &store).with_deny_cache(false);
    // The script loaded and run once, so each call below is one EVALSHA.
    assert!(limiter.check("warm", 1).await.unwrap().allowed);

    // A key's first call writes it afresh (the head and one 16-byte entry),
    // its second appends one entry.
    let one = two_calls(&mut admin, &limiter, "one", 1).await;
    let sent = Instant::now();
    let million = two_calls(&mut admin, &limiter, "million", 1_000_000).await;
    assert_eq!(million, one, "a call of 1 000 000 permits and a call of 1");
    let each = |commands: &[&str]| commands.iter().map(|c| (c.to_string(), 1)).collect::<BTreeMap<_, _>>();
    assert_eq!(
        one,
        [(each(&["evalsha", "time", "get", "set"]), 32), (each(&["evalsha", "time", "get", "append"]), 48)]
    );
    let (_, entries) = stored(&mut admin, &storage_key("victim", "million")).await;
    assert_eq!(entries.iter().map(|e| e.1).collect::<Vec<_>>(), [1e6, 2e6], "one entry per call, its weight");

    // One more permit waits for the first call's entry to leave, a minute
    // after it was admitted (so no sooner than a minute after it was sent).
    let denied = limiter.check("million", 1).await.unwrap();
    let retry = denied.retry_after.unwrap();
    let waited = sent.elapsed();
    assert!(
        retry <= Duration::from_secs(60) && retry + waited + Duration::from_millis(1) >= Duration::from_secs(60),
        "{denied:?}, {waited:?} after the first call"
    );
}

#[tokio::test]
async fn a_call_of_a_million_permits_decides_alike_in_memory_and_on_redis() {
    let both = BothStores::start().await;
    let policy = Policy::sliding_log("1000000/1m").unwrap();
    let mut decisions = Vec::new();
    for (backend, store) in both.each() {
        let limiter = Limiter::new(format!("big-{backend}"), policy.clone(), store).with_deny_cache(false);
        let start = redlimit::Clock::now_us(&both.clock).unwrap();
        let mut seen = Vec::new();
        for (at_ms, cost) in [(0, 999_999), (10, 2), (20, 1), (30, 1_000_000), (60_000, 1_000_000)] {
            both.clock.set_us(start + at_ms * 1000);
            let d = limiter.check("k", cost).await.unwrap();
            seen.push((d.allowed, d.remaining, d.retry_after, d.reset_after));
        }
        both.clock.set_us(start + 120_000_000);
        decisions.push(seen);
    }
    assert_eq!(decisions[0], decisions[1], "memory and Redis");
    let allowed: Vec<bool> = decisions[0].iter().map(|d| d.0).collect();
    assert_eq!(allowed, [true, false, true, false, false]);
    // Each denial names when enough weight leaves: the first entry, at 60 s.
    assert_eq!(decisions[0][1].2, Some(Duration::from_millis(59_990)));
    // A whole window later the first entry has left, not the one at 20 ms.
    assert_eq!(decisions[0][4].2, Some(Duration::from_millis(20)));
}

#[tokio::test]
async fn a_full_log_joins_its_newest_entry_and_errs_toward_denying() {
    let both = BothStores::start().await;
    let mut redis = connect(&both.server.url()).await;
    let policy = Policy::sliding_log("5000/1h").unwrap();
    let hour = 3_600_000_000;
    let mut answers = Vec::new();
    for (backend, store) in both.each() {
        let name = format!("full-{backend}");
        let limiter = Limiter::new(name.as_str(), policy.clone(), store).with_deny_cache(false);
        let start = redlimit::Clock::now_us(&both.clock).unwrap();
        // 1 010 calls a µs apart: the last 11 share the newest entry.
        for i in 0..MAX_ENTRIES + 10 {
            both.clock.set_us(start + i);
            assert!(limiter.check("k", 1).await.unwrap().allowed, "{backend} call {i}");
        }
        if backend == "redis" {
            let (_, entries) = stored(&mut redis, &storage_key(&name, "k")).await;
            assert_eq!(entries.len() as u64, MAX_ENTRIES, "at most {MAX_ENTRIES} entries");
        }
        // 1 010 held, so 4 000 more need 10 to leave: the tenth call's, at start + 9 µs.
        let denied = limiter.check("k", 4000).await.unwrap();
        assert_eq!(denied.retry_after, Some(Duration::from_micros(hour + 9 - (MAX_ENTRIES + 9))), "{backend}");
        // Once the 999 older calls left, the newest entry still counts all 11 it holds.
        both.clock.set_us(start + hour + MAX_ENTRIES + 8);
        let late = limiter.peek("k", 0).await.unwrap();
        both.clock.set_us(start + hour + MAX_ENTRIES + 9);
        let gone = limiter.peek("k", 0).await.unwrap();
        answers.push((denied.remaining, denied.retry_after, denied.reset_after, late.remaining, gone.remaining));
        both.clock.set_us(start + 3 * hour);
    }
    assert_eq!(answers[0], answers[1], "memory and Redis");
    assert_eq!((answers[0].3, answers[0].4), (5000 - 11, 5000));
}

#[tokio::test]
async fn running_totals_near_2_pow_48_are_lowered_on_redis() {
    let both = BothStores::start().await;
    let mut redis = connect(&both.server.url()).await;
    let limiter = Limiter::new("rebase", Policy::sliding_log("10/1s").unwrap(), &both.redis).with_deny_cache(false);
    let start = redlimit::Clock::now_us(&both.clock).unwrap();
    // A log that ran for a long time: its one live entry of 3 permits has 2^48 + 5 before it.
    let key = storage_key("rebase", "k");
    let high = (1u64 << 48) as f64 + 5.0;
    let record = |a: f64, b: f64| [a.to_le_bytes(), b.to_le_bytes()].concat();
    let log = [record(0.0, high), record(start as f64, high + 3.0)].concat();
    let _: () = redis.set(&key, log).await.unwrap();
    let _: () = redis.pexpire(&key, 60_000).await.unwrap();
    both.clock.set_us(start + 500_000);
    let d = limiter.check("k", 4).await.unwrap();
    assert!(d.allowed && d.remaining == 3, "{d:?}");
    let (head, entries) = stored(&mut redis, &key).await;
    assert_eq!(head.1, 0.0, "lowered by the oldest entry's total before it");
    assert_eq!(entries, [(start as f64, 3.0), ((start + 500_000) as f64, 7.0)]);
    let denied = limiter.check("k", 4).await.unwrap();
    assert_eq!(denied.retry_after, Some(Duration::from_millis(500)), "the first entry leaves at start + 1 s");
}

#[tokio::test]
async fn on_redis_clock_an_admitted_call_appends_its_entry_and_the_ttl_moves_once_per_window() {
    let server = RedisServer::start();
    let mut admin = connect(&server.url()).await;
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("lazy", Policy::sliding_log("100/1h").unwrap(), &store).with_deny_cache(false);
    let mut taken = 0;
    for i in 0..10 {
        taken += 1 + i % 2;
        assert_eq!(limiter.check("k", 1 + i % 2).await.unwrap().remaining, 100 - taken);
    }
    let counted = [
        server.command_calls("set").await,
        server.command_calls("append").await,
        server.command_calls("pexpire").await,
    ];
    assert_eq!(counted, [1, 9, 0], "the key written once with its TTL, then one APPEND per call");
    // Written with a TTL past two windows, so the next hour's writes keep it.
    let ttl: u64 = admin.pttl(storage_key("lazy", "k")).await.unwrap();
    assert!(ttl > 3_600_000 && ttl <= 7_200_001, "PTTL {ttl}");
    let (head, entries) = stored(&mut admin, &storage_key("lazy", "k")).await;
    assert_eq!(head.1, 0.0);
    let totals: Vec<f64> = entries.iter().map(|e| e.1).collect();
    assert_eq!(totals, [1.0, 3.0, 4.0, 6.0, 7.0, 9.0, 10.0, 12.0, 13.0, 15.0], "one entry per call, its weight");
    assert!(head.0 >= entries[9].0 + 3_600_000_000.0, "the head records when the TTL ends");
    assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 85);
}

#[tokio::test]
async fn entries_that_left_every_window_are_dropped_once_they_outnumber_the_rest() {
    let both = BothStores::start().await;
    let mut redis = connect(&both.server.url()).await;
    let policy = Policy::sliding_log("100/1s,30/100ms").unwrap();
    let mut answers = Vec::new();
    for (backend, store) in both.each() {
        let name = format!("trim-{backend}");
        let limiter = Limiter::new(name.as_str(), policy.clone(), store).with_deny_cache(false);
        let start = redlimit::Clock::now_us(&both.clock).unwrap();
        let mut seen = Vec::new();
        let mut held = Vec::new();
        // Ten calls a ms apart, then calls as those leave the widest window.
        for at_us in (0..10).map(|i| i * 1000).chain([1_001_000, 1_003_000, 1_005_000, 1_007_000]) {
            both.clock.set_us(start + at_us);
            let d = limiter.check("k", 2).await.unwrap();
            seen.push((d.allowed, d.remaining, d.reset_after));
            if backend == "redis" {
                held.push(stored(&mut redis, &storage_key(&name, "k")).await.1.len());
            }
        }
        if backend == "redis" {
            // Appended while no more left than stay (2 of 10, 4 of 11, 6 of 12); then
            // 8 of 13 left: the 5 live and the new entry are written afresh.
            assert_eq!(held, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 6], "entries held");
            let (head, entries) = stored(&mut redis, &storage_key(&name, "k")).await;
            assert_eq!(head, (0.0, 16.0), "a client clock records no TTL; 8 entries of 2 before the first");
            assert_eq!(entries[0].0, (start + 8000) as f64);
        }
        seen.push({
            let d = limiter.peek("k", 0).await.unwrap();
            (d.allowed, d.remaining, d.reset_after)
        });
        answers.push(seen);
        both.clock.set_us(start + 10_000_000);
    }
    assert_eq!(answers[0], answers[1], "memory and Redis");
}

#[tokio::test]
async fn a_log_of_the_former_layout_is_not_read() {
    let both = BothStores::start().await;
    let mut redis = connect(&both.server.url()).await;
    let limiter = Limiter::new("former", Policy::sliding_log("5/1h").unwrap(), &both.redis).with_deny_cache(false);
    let start = redlimit::Clock::now_us(&both.clock).unwrap();
    // The sorted set the former layout kept: a full log of 5 permits.
    let former = "redlimit:sliding_log/v2:6:former:k";
    let _: () = redis.zadd(former, "0:5", start).await.unwrap();
    let d = limiter.check("k", 1).await.unwrap();
    assert!(d.allowed && d.remaining == 4, "{d:?}");
    let left: Vec<String> = redis.zrange(former, 0, -1).await.unwrap();
    assert_eq!(left, ["0:5"], "left to its TTL");
    assert_eq!(stored(&mut redis, &storage_key("former", "k")).await.1.len(), 1);
}

#[tokio::test]
async fn a_key_written_on_both_clocks_always_holds_a_ttl_its_head_tells_truly() {
    let server = RedisServer::start();
    let mut admin = connect(&server.url()).await;
    let on_redis = Store::redis(&server.url()).await.unwrap();
    let epoch_us = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
    let on_client = on_redis.clone().with_clock(redlimit::ManualClock::starting_at(epoch_us()));
    let policy = Policy::sliding_log("100/1h").unwrap();
    let key = storage_key("both", "k");
    let mut remaining = Vec::new();
    let mut lasts = Vec::new();
    for store in [&on_redis, &on_client, &on_client, &on_redis, &on_redis] {
        let limiter = Limiter::new("both", policy.clone(), store).with_deny_cache(false);
        remaining.push(limiter.check("k", 1).await.unwrap().remaining);
        let ((head, _), _) = stored(&mut admin, &key).await;
        let ttl: i64 = admin.pttl(&key).await.unwrap();
        // A recorded TTL end is never past the key's true one (PTTL rounds
        // down to the ms); 0 records none.
        let ends_at = epoch_us() as f64 + ttl as f64 * 1000.0 + 1000.0;
        assert!(head == 0.0 || head <= ends_at, "head {head}, TTL {ttl} ms");
        lasts.push((head > 0.0, ttl > 5_400_000));
    }
    assert_eq!(remaining, [99, 98, 97, 96, 95], "one log whatever the clock");
    // Redis's clock writes it with a TTL two windows ahead and records it; a
    // client clock's write sets the TTL to the reset and records none, so the
    // next write on Redis's clock writes the key afresh.
    assert_eq!(lasts, [(true, true), (false, false), (false, false), (true, true), (true, true)]);
}
