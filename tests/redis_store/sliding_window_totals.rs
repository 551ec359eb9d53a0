//! `lua/sliding_window_totals.lua` (running totals, for many sub-windows)
//! answers exactly as `lua/sliding_window.lua` (the hash layout, which
//! tests/limiter/parity.rs holds to the Rust twin), field by field, on seeded random
//! timelines, across changes of precision too; the two layouts may follow
//! each other on one key; and with many sub-windows a steady call reads no
//! whole hash.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redlimit_test_support::redis_server::RedisServer;

const START: u64 = 1_767_225_600_000_000;

/// A policy as the script sees it: precision and (limit, window) pairs, in µs.
struct Policy {
    precision: u64,
    strategies: Vec<(u64, u64)>,
}

fn policies() -> Vec<Policy> {
    let p = |precision: u64, strategies: &[(u64, u64)]| Policy { precision, strategies: strategies.to_vec() };
    vec![
        p(100_000, &[(5, 1_000_000)]),
        p(500_000, &[(4, 1_000_000), (10, 5_000_000)]),
        p(100_000, &[(3, 300_000)]),
        p(10_000, &[(50, 1_000_000), (200, 5_000_000)]),
        p(1_000, &[(1000, 1_000_000)]),
        p(1_000, &[(8, 20_000), (30, 1_000_000), (60, 2_000_000)]),
    ]
}

/// Either layout's script, and one policy's numbers as its calls send them.
struct Scripts {
    hash: redis::Script,
    totals: redis::Script,
    policy: Vec<u8>,
}

impl Scripts {
    fn new(policy: &Policy) -> Self {
        let script = |totals| redlimit::__private::sliding_window_source(policy.precision, &policy.strategies, totals);
        let ((hash, policy), (totals, _)) = (script(false), script(true));
        Scripts { hash: redis::Script::new(&hash), totals: redis::Script::new(&totals), policy }
    }
}

/// One call with the runtime's ARGV: the policy, cost, peek, then now and
/// the slack (none: Redis's clock).
async fn call(
    con: &mut MultiplexedConnection,
    (script, policy): (&redis::Script, &[u8]),
    key: &str,
    now: Option<u64>,
    cost: u64,
    peek: bool,
) -> Vec<i64> {
    let mut invocation = script.key(key);
    invocation.arg(policy).arg(cost).arg(u8::from(peek));
    if let Some(now) = now {
        invocation.arg(now).arg(60_000);
    }
    invocation.invoke_async(con).await.unwrap()
}

async fn connect(server: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

/// The next time step: often around a sub-window, sometimes whole windows,
/// sometimes exactly a boundary the last answer named.
fn step(rng: &mut SmallRng, precision: u64, last: &[i64]) -> u64 {
    match rng.random_range(0..12) {
        0 => 0,
        1 => 1,
        2 | 3 => rng.random_range(0..precision),
        4 | 5 => rng.random_range(0..3 * precision),
        6 => rng.random_range(0..100 * precision),
        7 => rng.random_range(0..6_000_000),
        8 if last.len() == 7 && last[4] > 0 => last[4] as u64,
        9 if last.len() == 7 && last[4] > 0 => last[4] as u64 - 1,
        10 if last.len() == 7 => last[3] as u64,
        _ => precision,
    }
}

#[tokio::test]
async fn the_totals_layout_answers_as_the_hash_layout_on_random_timelines() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    let (mut decisions, mut denied) = (0, 0);
    for (index, policy) in policies().iter().enumerate() {
        let scripts = Scripts::new(policy);
        for seed in 0..4u64 {
            let mut rng = SmallRng::seed_from_u64(seed * 100 + index as u64);
            let mut now = START;
            let mut last: Vec<i64> = Vec::new();
            for i in 0..400 {
                if rng.random_range(0..12) == 0 {
                    now -= rng.random_range(0..3 * policy.precision).min(now - START);
                } else {
                    now += step(&mut rng, policy.precision, &last);
                }
                let user = rng.random_range(0..3);
                let (hash_key, totals_key) = (format!("h:{index}:{seed}:{user}"), format!("t:{index}:{seed}:{user}"));
                let cost = match rng.random_range(0..10) {
                    0 => 0,
                    1 => rng.random_range(2..5),
                    2 => rng.random_range(5..12),
                    _ => 1,
                };
                if rng.random_range(0..40) == 0 {
                    let _: () = redis::cmd("DEL").arg(&hash_key).arg(&totals_key).query_async(&mut con).await.unwrap();
                    continue;
                }
                let peek = rng.random_range(0..10) == 0;
                let hash = call(&mut con, (&scripts.hash, &scripts.policy), &hash_key, Some(now), cost, peek).await;
                let totals =
                    call(&mut con, (&scripts.totals, &scripts.policy), &totals_key, Some(now), cost, peek).await;
                assert_eq!(totals, hash, "policy {index}, seed {seed}, step {i}, now {now}, cost {cost}, peek {peek}");
                decisions += 1;
                denied += usize::from(hash[0] == 0);
                last = hash;
            }
        }
    }
    assert!(
        denied > decisions / 20 && denied < decisions * 9 / 10,
        "timelines too one-sided: {denied} of {decisions} denied"
    );
}

/// A policy moving between layouts (as the runtime may choose by its number
/// of sub-windows) keeps answering as if one layout had held the key.
#[tokio::test]
async fn the_layouts_can_follow_each_other_on_one_key() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    for (index, policy) in policies().iter().enumerate() {
        let scripts = Scripts::new(policy);
        let mut rng = SmallRng::seed_from_u64(7 + index as u64);
        let mut now = START;
        let mut last = Vec::new();
        for i in 0..400 {
            now += step(&mut rng, policy.precision, &last);
            let cost = rng.random_range(0..3);
            let expected =
                call(&mut con, (&scripts.hash, &scripts.policy), &format!("alone:{index}"), Some(now), cost, false)
                    .await;
            let script = if rng.random_range(0..2) == 0 { &scripts.hash } else { &scripts.totals };
            let mixed =
                call(&mut con, (script, &scripts.policy), &format!("mixed:{index}"), Some(now), cost, false).await;
            assert_eq!(mixed, expected, "policy {index}, step {i}");
            last = expected;
        }
    }
}

/// Each call under a precision drawn per call: the totals layout moves the
/// sub-windows counted at another precision as the hash layout does, and a
/// key either layout wrote last answers the same.
#[tokio::test]
async fn the_layouts_move_sub_windows_alike_across_changes_of_precision() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    let strategies = vec![(8, 2_000_000), (20, 6_000_000)];
    let precisions = [100_000u64, 200_000, 500_000, 1_000_000, 2_000_000];
    let scripts: Vec<Scripts> = precisions
        .iter()
        .map(|&precision| Scripts::new(&Policy { precision, strategies: strategies.clone() }))
        .collect();
    let (mut decisions, mut denied) = (0, 0);
    for seed in 0..4u64 {
        let mut rng = SmallRng::seed_from_u64(50 + seed);
        let mut now = START;
        let mut last = Vec::new();
        for i in 0..400 {
            let which = rng.random_range(0..precisions.len());
            // Mostly well within the shorter window, so that it fills.
            now += if rng.random_range(0..4) == 0 {
                step(&mut rng, precisions[which], &last)
            } else {
                rng.random_range(0..150_000)
            };
            let cost = if rng.random_range(0..8) == 0 { rng.random_range(0..6) } else { 1 };
            let peek = rng.random_range(0..10) == 0;
            let policy = &scripts[which];
            let key = |layout: &str| format!("{layout}:{seed}");
            let hash = call(&mut con, (&policy.hash, &policy.policy), &key("h"), Some(now), cost, peek).await;
            let totals = call(&mut con, (&policy.totals, &policy.policy), &key("t"), Some(now), cost, peek).await;
            let either = if rng.random_range(0..2) == 0 { &policy.hash } else { &policy.totals };
            let mixed = call(&mut con, (either, &policy.policy), &key("m"), Some(now), cost, peek).await;
            let at = precisions[which];
            assert_eq!(totals, hash, "seed {seed}, step {i}, precision {at}, now {now}, cost {cost}, peek {peek}");
            assert_eq!(mixed, hash, "seed {seed}, step {i}, precision {at}: the layouts following each other");
            decisions += 1;
            denied += usize::from(hash[0] == 0);
            last = hash;
        }
    }
    assert!(denied > decisions / 20 && denied < decisions * 9 / 10, "one-sided: {denied} of {decisions} denied");
}

/// `calls` of one command in `INFO commandstats`.
async fn calls(con: &mut MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(con).await.unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[tokio::test]
async fn with_a_thousand_sub_windows_a_steady_call_reads_a_few_fields_not_the_hash() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    let policy = Policy { precision: 1_000, strategies: vec![(1 << 40, 1_000_000)] };
    let scripts = Scripts::new(&policy);
    for n in 0..1000 {
        call(&mut con, (&scripts.totals, &scripts.policy), "steady", Some(START + n * 1_000), 1, false).await;
    }
    let fields: u64 = redis::cmd("HLEN").arg("steady").query_async(&mut con).await.unwrap();
    assert_eq!(fields, 1000 + 4, "a field per sub-window, and n, l, p, t1");
    let before = calls(&mut con, "hgetall").await;
    for n in 1000..1200 {
        let reply =
            call(&mut con, (&scripts.totals, &scripts.policy), "steady", Some(START + n * 1_000), 1, false).await;
        assert_eq!(reply[2], (1 << 40) - 1000, "1000 hits in the window after each call");
    }
    assert_eq!(calls(&mut con, "hgetall").await, before, "a steady call recounted the whole hash");
}

#[tokio::test]
async fn with_the_server_clock_every_key_gets_a_ttl() {
    let server = RedisServer::start();
    let mut con = connect(&server).await;
    for policy in policies() {
        let scripts = Scripts::new(&policy);
        for _ in 0..5 {
            let reply = call(&mut con, (&scripts.totals, &scripts.policy), "server-clock", None, 1, false).await;
            // 7 fields, then a (remaining, reset, retry) triple per strategy when there are several.
            let k = policy.strategies.len();
            assert_eq!(reply.len(), if k > 1 { 7 + 3 * k } else { 7 });
        }
        let ttl: i64 = redis::cmd("PTTL").arg("server-clock").query_async(&mut con).await.unwrap();
        assert!(ttl > 0, "no TTL ({ttl})");
        let _: () = redis::cmd("DEL").arg("server-clock").query_async(&mut con).await.unwrap();
    }
}
