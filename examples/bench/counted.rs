//! `bench --count <algorithm>/<path> [--calls N]`: a fixed number of calls
//! of one Redis case, for counting the client's instructions per decision
//! under callgrind (`examples/bench/client_instructions.sh`). Instruction
//! counts do not depend on what else the machine runs, where wall time and
//! CPU time do; they show what the runtime adds to a raw `EVALSHA`.
//!
//! The paths are the bench's: `script` (b), `limiter` (c) and `macro` (d),
//! with the same policies, keys and 64 calls in flight, on a current-thread
//! runtime so that every instruction of a call runs on the thread callgrind
//! counts. Only [`counted_calls`] is counted; the set-up and a warm-up of
//! 20 calls per task are not.
//!
//! `memory/<governor|backend|limiter|instant|macro>` counts the memory
//! section's gcra workload instead (`local.rs`: 10 000 keys, one call at a
//! time, no Redis): governor's keyed check, the memory store's bound
//! `decide` on governor's keys, `Limiter::check` on `Store::memory()`, and a
//! `#[rate_limit]` fn on it as the global store.

use crate::{cases, load, raw_connection, raw_keys, RawCall};
use governor::{Quota, RateLimiter};
use redlimit::__private::{Backend, Binding, Call, MemoryBackend};
use redlimit::{Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// `Some((case, calls))` when the command line asks for `--count`.
pub fn requested() -> Option<(String, u64)> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let at = args.iter().position(|a| a == "--count")?;
    let case = args.get(at + 1).expect("--count takes a case, e.g. fixed_window/macro").clone();
    let calls = match args.iter().position(|a| a == "--calls") {
        Some(c) => args.get(c + 1).and_then(|n| n.parse().ok()).expect("--calls takes a number of calls"),
        None => 12_800,
    };
    Some((case, calls))
}

/// Runs `calls` calls of `case` (`<algorithm>/<script|limiter|macro>`)
/// against a redis-server of its own, after a warm-up.
pub fn run(case: &str, calls: u64) {
    let (name, path) = case.split_once('/').expect("a case is <algorithm>/<path>");
    if name == "memory" {
        memory(path, calls);
        eprintln!("{case}: {calls} calls made");
        return;
    }
    let algo = cases::algorithms()
        .into_iter()
        .find(|a| a.kind.name() == name)
        .unwrap_or_else(|| panic!("no algorithm {name:?}"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let server = RedisServer::start();
    let (store, con) = runtime.block_on(async {
        let options = RedisOptions::default().with_response_timeout(Duration::from_secs(5));
        let store = Store::redis_with(&server.url(), options).await.expect("connect the runtime");
        redlimit::init(store.clone()).expect("the global store is set once");
        (store, raw_connection(&server.url()).await)
    });
    match path {
        "script" => {
            let (raw, keys) = (Arc::new(RawCall::new(&algo, false)), Arc::new(raw_keys(&algo)));
            warm_then_count(&runtime, calls, move |task, n| {
                let (raw, keys, mut con) = (raw.clone(), keys.clone(), con.clone());
                async move { raw.call(&mut con, &keys[load::user(task, n) as usize]).await }
            });
        }
        "limiter" => {
            let limiter = Limiter::new(format!("bench.limiter.{name}"), algo.policy.clone(), &store);
            let keys = Arc::new((0..load::USERS).map(|u| format!("user:{u}")).collect::<Vec<_>>());
            warm_then_count(&runtime, calls, move |task, n| {
                let (limiter, keys) = (limiter.clone(), keys.clone());
                async move {
                    limiter.check(&keys[load::user(task, n) as usize], 1).await.expect("Limiter::check");
                }
            });
        }
        "macro" => {
            let kind = algo.kind;
            warm_then_count(&runtime, calls, move |task, n| async move {
                let _ = cases::call_macro(kind, load::user(task, n)).await;
            });
        }
        other => panic!("no path {other:?}: use script, limiter or macro"),
    }
    eprintln!("{case}: {calls} calls made");
}

/// The memory section's gcra workload, one call at a time.
fn memory(path: &str, calls: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime");
    let keys: Vec<String> = (0..10_000).map(|u| format!("user:{u}")).collect();
    let key = |i: u64| &keys[(i % 10_000) as usize];
    let gcra = Policy::gcra("1000000/1s", 999_999).expect("a valid policy");
    match path {
        "governor" => {
            let governor = RateLimiter::keyed(Quota::per_second(NonZeroU32::new(1_000_000).expect("not zero")));
            one_at_a_time(&runtime, calls, |i| {
                black_box(governor.check_key(key(i))).ok();
                async {}
            });
        }
        "backend" => {
            let binding = Binding { prefix: "redlimit", name: "bench.memory", policy: &gcra, server_clock: true };
            let bound = MemoryBackend::new().bind(binding);
            one_at_a_time(&runtime, calls, |i| {
                black_box(bound.decide(Call::check(key(i).as_bytes(), 1), &redlimit::ServerClock));
                async {}
            });
        }
        "limiter" => {
            let limiter = Limiter::new("bench.memory", gcra.clone(), &Store::memory());
            one_at_a_time(&runtime, calls, |i| {
                let (limiter, key) = (&limiter, key(i));
                async move {
                    black_box(limiter.check(key, 1).await.expect("the memory store always answers"));
                }
            });
        }
        "instant" => {
            let store = Store::from_backend(std::sync::Arc::new(crate::local::AnswersAtOnce));
            let limiter = Limiter::new("bench.memory", gcra.clone(), &store);
            one_at_a_time(&runtime, calls, |i| {
                let (limiter, key) = (&limiter, key(i));
                async move {
                    black_box(limiter.check(key, 1).await.expect("answers at once"));
                }
            });
        }
        // The attribute, on the global store made `Store::memory()`.
        "macro" => {
            redlimit::init(Store::memory()).expect("the global store is set once");
            one_at_a_time(&runtime, calls, |i| async move {
                assert!(black_box(cases::memory_gcra(i % 10_000).await).is_ok());
            });
        }
        other => panic!("no memory path {other:?}: use governor, backend, limiter or macro"),
    }
}

/// A warm-up of 20 000 calls, then `calls` counted ones, each awaited before the next.
fn one_at_a_time<F: FnMut(u64) -> Fut, Fut: Future<Output = ()>>(runtime: &Runtime, calls: u64, mut call: F) {
    // Two halves, so this is never the same machine code as the counted
    // loop (identical functions may be merged, and the warm-up counted).
    for half in 0..2u64 {
        runtime.block_on(async {
            for i in half * 10_000..(half + 1) * 10_000 {
                call(i).await;
            }
        });
    }
    counted_memory_calls(runtime, calls, call);
}

/// The part callgrind counts for a memory case (`--toggle-collect=*counted_*`).
#[inline(never)]
fn counted_memory_calls<F: FnMut(u64) -> Fut, Fut: Future<Output = ()>>(runtime: &Runtime, calls: u64, mut call: F) {
    runtime.block_on(async {
        for i in 0..calls {
            call(i).await;
        }
    });
}

fn warm_then_count<F, Fut>(runtime: &Runtime, calls: u64, call: F)
where
    F: Fn(u64, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    runtime.block_on(in_flight(load::IN_FLIGHT as u64 * 20, call.clone()));
    counted_calls(runtime, calls, call);
}

/// The part callgrind counts (`--toggle-collect=*counted_calls*`).
#[inline(never)]
fn counted_calls<F, Fut>(runtime: &Runtime, calls: u64, call: F)
where
    F: Fn(u64, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    runtime.block_on(in_flight(calls, call));
}

/// `calls` calls of `call(task, n)`, spread over [`load::IN_FLIGHT`] tasks.
async fn in_flight<F, Fut>(calls: u64, call: F)
where
    F: Fn(u64, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let per_task = calls / load::IN_FLIGHT as u64;
    let tasks: Vec<_> = (0..load::IN_FLIGHT as u64)
        .map(|task| {
            let call = call.clone();
            tokio::spawn(async move {
                for n in 0..per_task {
                    call(task, n).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a call task");
    }
}
