#![cfg(feature = "redis")]
//! A concurrency limit across OS processes, on one private Redis and on a
//! private 3+3 Redis Cluster.
//!
//! - 4 processes × 50 tasks take turns on one key at a limit of 10, each
//!   task a fixed count of acquisitions (half through `Limiter::acquire_wait`,
//!   half through a `#[rate_limit(algo = "concurrency", on_limit = "wait")]`
//!   function, on the same key). Every body counts itself in and out of the
//!   store with `INCR`/`DECR`: the count inside never exceeds the limit.
//! - A process holding every permit is killed (SIGKILL): its permits come
//!   back when their leases end, by Redis's clock, and not before.
//!
//! The workers are this test binary again, running only
//! `concurrency_worker` with `REDLIMIT_CONCURRENCY_WORKER` set
//! (`redlimit_test_support::child_process`); `cargo` is not involved.
//!
//! `cargo test --test concurrency_processes` (needs `redis-server` and `redis-cli`)

use redlimit::{rate_limit, Limiter, OnError, Permit, Policy, RateLimited, RedisOptions, Store};
use redlimit_test_support::child_process::{self, TestChild};
use redlimit_test_support::redis_cluster::RedisCluster;
use redlimit_test_support::redis_server::RedisServer;
use std::time::{Duration, Instant, UNIX_EPOCH};

const WORKER_VAR: &str = "REDLIMIT_CONCURRENCY_WORKER";

const PROCESSES: usize = 4;
const TASKS: u64 = 50;
/// Acquisitions per task: 4 000 bodies in all.
const ACQUISITIONS: u64 = 20;
/// The limit of [`guarded`] and of the workers' limiter, which share a key.
const LIMIT: u64 = 10;
const NAME: &str = "procs.shared";
/// The key [`guarded`]`("7", ..)` builds.
const KEY: &str = "tenant:7";
/// Longer than any wait a loaded machine makes a call sit through: a
/// worker that cannot get a permit in this long fails loudly.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// How long a worker waits for Redis to answer, store and counters alike.
const PATIENCE: Duration = Duration::from_secs(10);

/// The bodies' counters, in one hash slot so one script updates them on a cluster.
const INSIDE: &str = "{procs}:inside";
const MAX_INSIDE: &str = "{procs}:max";
const VIOLATIONS: &str = "{procs}:violations";
const BODIES: &str = "{procs}:bodies";

/// A body comes in: counts itself inside, keeps the largest count seen,
/// counts a violation when there are more than ARGV[1] inside.
const ENTER: &str = r"
local inside = redis.call('INCR', KEYS[1])
if inside > tonumber(ARGV[1]) then redis.call('INCR', KEYS[3]) end
if inside > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], inside) end
redis.call('INCR', KEYS[4])
return inside";

/// The SIGKILL test's limiter: the holder takes all of its permits.
const HOLD_NAME: &str = "procs.holder";
const HOLD_KEY: &str = "report:1";
const HOLD_LIMIT: u64 = 3;
/// Renewed every second: a killed holder's leases still have two seconds
/// or so to run when the test reads them.
const HOLD_LEASE: &str = "3s";

/// The body of a worker process; without `REDLIMIT_CONCURRENCY_WORKER` (an
/// ordinary `cargo test`) it does nothing.
#[test]
fn concurrency_worker() {
    let Some(spec) = child_process::spec(WORKER_VAR) else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    match spec.split_once(' ') {
        Some(("load", url)) => runtime.block_on(load(url)),
        Some(("hold", url)) => runtime.block_on(hold(url)),
        _ => panic!("{WORKER_VAR}={spec:?}: expected `load <url>` or `hold <url>`"),
    }
}

/// A store that waits [`PATIENCE`] for Redis: on a loaded machine calls
/// queue behind many others, and a timed-out call would be let through
/// holding nothing (the default `on_error`), which is not what is tested.
async fn patient_store(url: &str) -> Store {
    let options = RedisOptions::default().with_response_timeout(PATIENCE);
    Store::redis_with(url, options).await.expect("connect to the private Redis")
}

/// A connection to the bodies' counters, on a single server or a cluster.
#[derive(Clone)]
enum Counters {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Counters {
    /// Connects with the store's patience: counting must not fail where
    /// deciding would not (redis-rs gives up after 500 ms by default).
    async fn connect(url: &str) -> Counters {
        match url.strip_prefix("redis+cluster://") {
            Some(seeds) => {
                let seeds: Vec<String> = seeds.split(',').map(|seed| format!("redis://{seed}")).collect();
                let client = redis::cluster::ClusterClient::builder(seeds)
                    .connection_timeout(PATIENCE)
                    .response_timeout(PATIENCE)
                    .build()
                    .unwrap();
                Counters::Cluster(client.get_async_connection().await.expect("connect to the cluster"))
            }
            None => {
                let client = redis::Client::open(url).unwrap();
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(PATIENCE))
                    .set_response_timeout(Some(PATIENCE));
                let con = client.get_multiplexed_async_connection_with_config(&config).await;
                Counters::Single(con.expect("connect to the server"))
            }
        }
    }

    async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> T {
        match self.clone() {
            Counters::Single(mut con) => command.query_async(&mut con).await,
            Counters::Cluster(mut con) => command.query_async(&mut con).await,
        }
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
    }

    /// Counts a body in (see [`ENTER`]): how many are inside with it.
    async fn enter(&self) -> u64 {
        let script = redis::Script::new(ENTER);
        let mut invocation = script.key(INSIDE);
        invocation.key(MAX_INSIDE).key(VIOLATIONS).key(BODIES).arg(LIMIT);
        match self.clone() {
            Counters::Single(mut con) => invocation.invoke_async(&mut con).await,
            Counters::Cluster(mut con) => invocation.invoke_async(&mut con).await,
        }
        .expect("count a body in")
    }

    /// What every body does while it holds its permit: in, a pause, out.
    /// The pause lets others try to come in; no count depends on its length.
    async fn body(&self) {
        self.enter().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let _: i64 = self.query(redis::cmd("DECR").arg(INSIDE)).await;
    }

    async fn get(&self, key: &str) -> u64 {
        let value: Option<u64> = self.query(redis::cmd("GET").arg(key)).await;
        value.unwrap_or(0)
    }
}

/// What users write: a permit held for the whole body, waited for when
/// all are taken; a store failure denies (and the worker fails) rather
/// than let a call in unseen.
#[rate_limit(
    name = "procs.shared",
    algo = "concurrency",
    limit = 10,
    lease = "30s",
    key = "tenant:<tenant>",
    on_limit = "wait",
    max_wait = "60s",
    on_error = "deny"
)]
async fn guarded(tenant: &str, counters: &Counters) -> Result<(), RateLimited> {
    counters.body().await;
    Ok(())
}

/// A load worker: [`TASKS`] tasks, each [`ACQUISITIONS`] bodies, the even
/// tasks through a limiter of [`guarded`]'s name and policy, the odd ones
/// through [`guarded`].
async fn load(url: &str) {
    let store = patient_store(url).await;
    redlimit::init(store.clone()).unwrap();
    let limiter = Limiter::new(NAME, Policy::concurrency(LIMIT, "30s").unwrap(), &store).with_on_error(OnError::Deny);
    let counters = Counters::connect(url).await;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (limiter, counters) = (limiter.clone(), counters.clone());
            tokio::spawn(async move {
                for i in 0..ACQUISITIONS {
                    if task % 2 == 0 {
                        let permit = limiter.acquire_wait(KEY, Some(MAX_WAIT)).await;
                        let permit = permit.unwrap_or_else(|denied| panic!("task {task}, acquisition {i}: {denied}"));
                        assert!(permit.is_held());
                        counters.body().await;
                        drop(permit);
                    } else {
                        let done = guarded("7", &counters).await;
                        done.unwrap_or_else(|denied| panic!("task {task}, call {i}: {denied}"));
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a task of the worker failed");
    }
    child_process::say(&format!("bodies {}", TASKS * ACQUISITIONS));
}

/// A holder: takes every permit of [`HOLD_KEY`], says so, and holds them
/// (renewing their leases) until killed.
async fn hold(url: &str) {
    child_process::exit_with_parent();
    let store = patient_store(url).await;
    let limiter = Limiter::new(HOLD_NAME, Policy::concurrency(HOLD_LIMIT, HOLD_LEASE).unwrap(), &store);
    let mut permits = Vec::new();
    for _ in 0..HOLD_LIMIT {
        permits.push(limiter.acquire(HOLD_KEY).await.expect("the holder takes a permit"));
    }
    assert!(permits.iter().all(Permit::is_held));
    child_process::say(&format!("holding {}", permits.len()));
    std::future::pending::<()>().await;
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn never_more_than_the_limit_inside(url: &str, topology: &str) {
    let started = Instant::now();
    let workers: Vec<_> =
        (0..PROCESSES).map(|_| TestChild::spawn("concurrency_worker", WORKER_VAR, &format!("load {url}"))).collect();
    for worker in workers {
        assert_eq!(worker.finish(), [format!("bodies {}", TASKS * ACQUISITIONS)], "{topology}");
    }
    let elapsed = started.elapsed();
    let (max, violations, bodies, inside) = block_on(async {
        let counters = Counters::connect(url).await;
        (
            counters.get(MAX_INSIDE).await,
            counters.get(VIOLATIONS).await,
            counters.get(BODIES).await,
            counters.get(INSIDE).await,
        )
    });
    println!("{topology}: {bodies} bodies in {elapsed:?}, at most {max} inside at once, {violations} violations");
    assert_eq!(bodies, PROCESSES as u64 * TASKS * ACQUISITIONS, "{topology}: every body ran");
    assert_eq!(inside, 0, "{topology}: every body went out");
    assert_eq!(violations, 0, "{topology}: more than {LIMIT} bodies inside at once (at most {max})");
    assert!(max <= LIMIT, "{topology}: {max} inside at once");
    assert!(max > 1, "{topology}: the bodies never overlapped, so the limit was never put to the test");
}

#[test]
fn four_processes_never_hold_more_than_the_limit_on_a_single_server() {
    let server = RedisServer::start();
    never_more_than_the_limit_inside(&server.url(), "single");
}

#[test]
fn four_processes_never_hold_more_than_the_limit_on_a_cluster() {
    let cluster = RedisCluster::start();
    never_more_than_the_limit_inside(&cluster.url(), "cluster");
}

/// Redis's clock, in µs since the epoch.
async fn redis_time(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(con).await.unwrap();
    secs * 1_000_000 + micros
}

fn micros(t: std::time::SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// A holder of every permit is killed: no renewal, no release. Each lease
/// ends at its score (Redis µs); while `k` have ended, `k` acquisitions can
/// pass and no more. The test takes them back one at a time, asking
/// Redis's `TIME` before and after each try: a denial must come before the
/// next lease's end, a success after it (so no try asked after a lease
/// ended is denied); all are back at the last end `E` and, as the tries
/// follow each other 10 ms apart, within a margin of it: 2 s, which only
/// a machine stalling each try for more than half a second would exceed.
#[test]
fn a_killed_holders_permits_come_back_when_their_leases_end_and_not_before() {
    /// Polls before giving up: at least 10 s of 10 ms pauses, for 3 s leases.
    const POLLS: usize = 1_000;
    /// All are back within this long after the last lease ends.
    const MARGIN_US: u64 = 2_000_000;
    let server = RedisServer::start();
    let url = server.url();
    let mut holder = TestChild::spawn("concurrency_worker", WORKER_VAR, &format!("hold {url}"));
    assert_eq!(holder.line(), format!("holding {HOLD_LIMIT}"));
    holder.kill();
    block_on(async {
        let Counters::Single(mut con) = Counters::connect(&url).await else { unreachable!("a single server") };
        let keys: Vec<String> = redis::cmd("KEYS").arg("redlimit:concurrency*").query_async(&mut con).await.unwrap();
        let [key] = &keys[..] else { panic!("one concurrency key expected: {keys:?}") };
        assert!(key.ends_with(&format!(":{}:{HOLD_NAME}:{HOLD_KEY}", HOLD_NAME.len())), "{key}");
        let zrange = redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").clone();
        // A renewal the holder wrote just before it died may still be on its
        // way into Redis: read until two reads 50 ms apart agree.
        let mut set: Vec<(Vec<u8>, f64)> = zrange.query_async(&mut con).await.unwrap();
        for read in 0.. {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let again: Vec<(Vec<u8>, f64)> = zrange.query_async(&mut con).await.unwrap();
            if again == set {
                break;
            }
            assert!(read < 20, "the killed holder's leases keep changing: {again:?}");
            set = again;
        }
        let mut ends: Vec<u64> = set.iter().filter(|(member, _)| !member.is_empty()).map(|&(_, s)| s as u64).collect();
        ends.sort_unstable();
        assert_eq!(ends.len() as u64, HOLD_LIMIT, "the killed holder's leases: {set:?}");
        let count = set.iter().find(|(member, _)| member.is_empty()).map(|&(_, score)| score);
        assert_eq!(count, Some(-(HOLD_LIMIT as f64)), "the member '' holds minus the count: {set:?}");
        let last_end = *ends.last().unwrap();
        let read_at = redis_time(&mut con).await;
        assert!(read_at < ends[0], "the leases were still running when the test read them");

        let store = patient_store(&url).await;
        let limiter = Limiter::new(HOLD_NAME, Policy::concurrency(HOLD_LIMIT, HOLD_LEASE).unwrap(), &store);
        let (mut taken, mut denials) = (Vec::new(), 0);
        for _ in 0..POLLS {
            let before = redis_time(&mut con).await;
            let tried = limiter.acquire(HOLD_KEY).await;
            let after = redis_time(&mut con).await;
            let next_end = ends[taken.len()];
            match tried {
                Ok(permit) => {
                    assert!(permit.is_held(), "a permit the store took, not one let through: {permit:?}");
                    let at = micros(permit.decision().decided_at);
                    assert!(
                        at >= next_end && after >= next_end,
                        "permit {} back at {at}, its lease ends at {next_end}",
                        taken.len() + 1
                    );
                    taken.push((permit, at));
                    if taken.len() == ends.len() {
                        break;
                    }
                }
                Err(denied) => {
                    let at = micros(denied.decision().decided_at);
                    assert!(
                        at < next_end && before < next_end,
                        "denied at {at} (asked at {before}), yet a lease ended at {next_end}"
                    );
                    denials += 1;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(taken.len(), ends.len(), "every permit came back within {POLLS} polls");
        let first_back = taken[0].1;
        let all_back = taken.last().unwrap().1;
        println!(
            "read at {read_at}; leases ended {:?} µs later; first back +{} µs, all back +{} µs after the last end; {denials} denials",
            ends.iter().map(|e| e - read_at).collect::<Vec<_>>(),
            first_back - ends[0],
            all_back - last_end,
        );
        assert!(first_back >= ends[0], "never before a lease could end");
        assert!(all_back >= last_end, "not all back before the last lease ended");
        assert!(
            all_back <= last_end + MARGIN_US,
            "all back at {all_back}, more than {MARGIN_US} µs after the last lease ended at {last_end}"
        );
    });
}
