//! Replica acknowledgements: `Limiter::check` (gcra, distinct keys) on a
//! store with `with_replica_acks(1, ..)` against one without, in turn in
//! every round, on the bench's server with one replica started for it (so
//! both sides pay the replication stream alike). One call in flight shows
//! a lone call's round trip; 64 show batches, which pay one `WAIT` each.

use crate::load::{drive, user_among, Measured};
use crate::{flush, median_ratio, Options};
use redis::aio::MultiplexedConnection;
use redlimit::{Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::time::{Duration, Instant};

const IN_FLIGHT: [usize; 2] = [1, 64];

/// Runs the section and prints one line per number of calls in flight.
pub async fn run(server: &RedisServer, admin: &mut MultiplexedConnection, options: Options) {
    let port = server.port().to_string();
    let replica = RedisServer::start_with(free_port(), &["--replicaof", "127.0.0.1", &port], None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !replica.cli(&["INFO", "replication"]).contains("master_link_status:up") {
        assert!(Instant::now() < deadline, "the bench's replica did not sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    let base = RedisOptions::default().with_response_timeout(Duration::from_secs(5));
    let acked = base.clone().with_replica_acks(1, Duration::from_secs(1));
    let off = Store::redis_with(&server.url(), base).await.expect("connect the store without acknowledgements");
    let on = Store::redis_with(&server.url(), acked).await.expect("connect the acknowledged store");
    println!(
        "\nreplica acks: Limiter::check of gcra with_replica_acks(1, 1s) against none, one replica attached, in turn \
         in each of {} rounds; {:?} measured per case; load average {}",
        options.rounds,
        options.window,
        crate::local::load_average()
    );
    let policy = Policy::gcra("1000/1s", 999).unwrap();
    for in_flight in IN_FLIGHT {
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for round in 0..options.rounds {
            let run = options.run();
            let order = if round % 2 == 0 { [&on, &off] } else { [&off, &on] };
            for store in order {
                let limiter = Limiter::new("bench.acks", policy.clone(), store);
                let measured = measure(limiter, in_flight, admin, run).await;
                match std::ptr::eq(store, &on) {
                    true => with.push(measured),
                    false => without.push(measured),
                }
            }
        }
        let speed = median_ratio(&with, &without);
        let (with, without) = (Measured::mean(&with), Measured::mean(&without));
        println!(
            "bench case=acks/in_flight={in_flight} on {:.0}/s, off {:.0}/s (×{speed:.2}); p50 µs on {:.0}, off {:.0}; \
             p99 µs on {:.0}, off {:.0}; redis cpu µs/decision on {:.2}, off {:.2}; evalsha/decision on {:.3}, off {:.3}",
            with.ops_per_s,
            without.ops_per_s,
            with.p50_us,
            without.p50_us,
            with.p99_us,
            without.p99_us,
            with.server_cpu_us_per_op,
            without.server_cpu_us_per_op,
            with.evalsha_per_op,
            without.evalsha_per_op,
        );
    }
}

async fn measure(limiter: Limiter, in_flight: usize, admin: &mut MultiplexedConnection, options: Options) -> Measured {
    flush(admin).await;
    drive(admin, in_flight, options.warmup, options.window, move |task, n| {
        let limiter = limiter.clone();
        async move {
            let user = user_among(task, n, in_flight);
            limiter.check(user.to_string(), 1).await.expect("Limiter::check");
        }
    })
    .await
}
