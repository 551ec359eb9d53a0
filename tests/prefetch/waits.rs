//! A prefetching call on a key out of permits waits for at most one refill
//! it did not send: calls that find a refill in flight share its denial
//! instead of queueing one refill each behind it. Under load, this test's
//! own Redis is slowed (a second connection keeps it in `DEBUG SLEEP`), so
//! a queue of refills would add up to far more than the response timeout;
//! the load is a count of calls, and the bound asserted is the response
//! timeout, which the code guarantees. Calls polled in one task
//! (`join_all`) reach the limiter in the order written, so what they share
//! is counted exactly. Behind a link that holds every request (a proxy of
//! this test's own), a call's wait for a refill and its own calls together
//! end at its arrival plus the response timeout.

use futures_util::future::join_all;
use futures_util::FutureExt;
use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TASKS: usize = 200;
const CALLS_PER_TASK: usize = 5;

/// Keeps `url`'s server asleep 2 ms at a time until `stop`: every command
/// waits for a gap between two sleeps, as if the server were that far away.
async fn slow_down(url: String, stop: Arc<AtomicBool>) {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    while !stop.load(Ordering::Relaxed) {
        let _: () = redis::cmd("DEBUG").arg("SLEEP").arg("0.002").query_async(&mut connection).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_a_denied_key_share_the_refills_denial_and_return_within_the_response_timeout() {
    let server = RedisServer::start_on(free_port, &["--enable-debug-command", "yes"], None);
    let store = Store::redis(&server.url()).await.unwrap();
    // No deny cache: every call that is not shared reaches the store.
    let limiter = Limiter::new("denied-hot", Policy::fixed_window("1/1h").unwrap(), &store)
        .with_deny_cache(false)
        .with_prefetch(100)
        .unwrap();
    assert!(limiter.check("hot", 1).await.unwrap().allowed);

    let stop = Arc::new(AtomicBool::new(false));
    let slowing = tokio::spawn(slow_down(server.url(), stop.clone()));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut longest = Duration::ZERO;
                for _ in 0..CALLS_PER_TASK {
                    let started = Instant::now();
                    let decision = limiter.check("hot", 1).await.unwrap();
                    longest = longest.max(started.elapsed());
                    assert!(!decision.allowed, "the window's one permit was spent");
                    assert!(decision.retry_after.is_some(), "a shared denial keeps its retry_after");
                }
                longest
            })
        })
        .collect();
    let mut longest = Duration::ZERO;
    for task in tasks {
        longest = longest.max(task.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    slowing.await.unwrap();

    let timeout = RedisOptions::default().response_timeout;
    assert!(longest < timeout, "a call took {longest:?}, past the response timeout of {timeout:?}");
}

/// A key whose last refill was denied: the calls that come while the next
/// refill is in flight wait for it and share its denial, so the store
/// decides one call for all of them.
#[tokio::test]
async fn calls_that_come_during_a_denied_refill_share_its_denial_in_one_script_call() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("denied-share", Policy::fixed_window("1/1h").unwrap(), &store)
        .with_deny_cache(false)
        .with_prefetch(100)
        .unwrap();
    assert!(limiter.check("hot", 1).await.unwrap().allowed);
    let first = limiter.check("hot", 1).await.unwrap();
    assert!(!first.allowed);
    let before = server.evalsha_calls().await;
    let calls = join_all((0..24).map(|_| limiter.check("hot", 1))).await;
    let script_calls = server.evalsha_calls().await - before;
    for decision in calls {
        let decision = decision.unwrap();
        assert!(!decision.allowed);
        let retry = decision.retry_after.expect("a denial of a window names when it ends");
        assert!(retry <= first.retry_after.unwrap(), "counted down from the shared denial");
    }
    assert_eq!(script_calls, 1, "one refill, its denial shared by the 23 calls that came while it was in flight");
}

/// A refill dropped while calls wait for it (its caller cancelled) wakes
/// them: each makes its own call, none hangs.
#[tokio::test]
async fn a_cancelled_refill_wakes_the_calls_waiting_for_it() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter =
        Limiter::new("cancelled-refill", Policy::token_bucket(100, "1/1m").unwrap(), &store).with_prefetch(8).unwrap();
    for _ in 0..3 {
        limiter.check("hot", 1).await.unwrap(); // refills of 1 and 2, then one spent here
    }
    let mut refill = Box::pin(limiter.check("hot", 1)); // a refill of 4: room for 3 more
    assert!((&mut refill).now_or_never().is_none(), "sent, not answered yet");
    let mut waiting = Box::pin(limiter.check("hot", 1));
    assert!((&mut waiting).now_or_never().is_none(), "waits for the refill");
    drop(refill);
    let decision = tokio::time::timeout(RedisOptions::default().response_timeout, waiting).await;
    assert!(decision.expect("woken by the dropped refill").unwrap().allowed);
}

/// Listens on a port of its own and forwards to `server`, each request
/// held `delay_ms` (as it is when the request comes) from when it came:
/// every store call takes at least that long, as over a slow link.
/// Answers come back at once.
async fn delayed(server: std::net::SocketAddr, delay_ms: Arc<AtomicU64>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(upstream) = tokio::net::TcpStream::connect(server).await else { return };
            let ((mut client_read, mut client_write), (mut up_read, mut up_write)) =
                (client.into_split(), upstream.into_split());
            let delay_ms = delay_ms.clone();
            let (sending, mut held) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = client_read.read(&mut buffer).await {
                    let delay = Duration::from_millis(delay_ms.load(Ordering::Relaxed));
                    if sending.send((Instant::now() + delay, buffer[..n].to_vec())).is_err() {
                        return;
                    }
                }
            });
            tokio::spawn(async move {
                while let Some((due, bytes)) = held.recv().await {
                    tokio::time::sleep_until(due.into()).await;
                    if up_write.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            });
            tokio::spawn(async move { tokio::io::copy(&mut up_read, &mut client_write).await });
        }
    });
    url
}

/// A refill that must try twice (the store has fewer permits than it asks
/// for), its waiters left short and refilling again: four slow store calls
/// one after another (so 1.8 times the response timeout without a bound),
/// each well within the response timeout. Every call
/// still returns by its arrival plus the response timeout (as an answer, or
/// `Error::Timeout` past it), never after the refill's wait and its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefetching_call_returns_within_its_response_timeout_however_slow_the_refills() {
    const KEYS: usize = 4;
    const CALLS_PER_KEY: usize = 8;
    let timeout = Duration::from_millis(400);
    let server = RedisServer::start();
    let delay_ms = Arc::new(AtomicU64::new(0));
    let url = delayed(([127, 0, 0, 1], server.port()).into(), delay_ms.clone()).await;
    let options = RedisOptions::default().with_response_timeout(timeout);
    let store = Store::redis_with(&url, options).await.unwrap();
    // A long ttl, so the refills keep growing while the server is slow.
    let limiter = Limiter::new("slow-refills", Policy::fixed_window("10/1h").unwrap(), &store)
        .with_deny_cache(false)
        .with_prefetch_ttl(8, Duration::from_secs(600))
        .unwrap();
    for key in 0..KEYS {
        for _ in 0..7 {
            // Refills of 1, 2 and 4, all spent: the next asks for 8 where 3 remain.
            assert!(limiter.check(key.to_string(), 1).await.unwrap().allowed);
        }
    }

    // Each store call takes 45% of the response timeout: none times out alone.
    delay_ms.store(timeout.as_millis() as u64 * 45 / 100, Ordering::Relaxed);
    let mut longest = Duration::ZERO;
    let mut admitted = 0;
    for key in 0..KEYS {
        let key = key.to_string();
        let timed = |_| async {
            let started = Instant::now();
            let result = limiter.check(&key, 1).await;
            (started.elapsed(), result)
        };
        let calls = tokio::time::timeout(timeout * 20, join_all((0..CALLS_PER_KEY).map(timed))).await;
        let mut timed_out = 0;
        for (took, result) in calls.expect("every call returns") {
            longest = longest.max(took);
            match result {
                Ok(decision) => admitted += decision.allowed as usize,
                Err(error) => {
                    assert!(matches!(error, Error::Timeout(after) if after == timeout), "{error}");
                    timed_out += 1;
                }
            }
        }
        let bound = timeout * 3 / 2;
        assert!(longest <= bound, "a call took {longest:?}, past its response timeout of {timeout:?} plus half");
        // Its refill took two slow calls: a waiter it left short had no time for two more.
        assert!(timed_out >= 1, "key {key}: every call answered, none cut at its deadline");
    }
    assert!(admitted <= 3 * KEYS, "{admitted} admitted past the 3 each key had left");
}
