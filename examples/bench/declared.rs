//! A batch's two forms on one server, raw: every key declared (what the
//! runtime sends to one server or Sentinel) against only the first declared
//! and the others in ARGV (what it sends across a cluster node's slots), 16
//! gcra decisions per EVALSHA at 64 in flight, in turn in every round.

use crate::load::{self, drive, Measured};
use crate::{flush, median_ratio, Options};
use redis::aio::MultiplexedConnection;
use redlimit::Policy;
use std::sync::Arc;

/// Decisions per script call.
const BATCH: u64 = 16;

pub async fn run(admin: &mut MultiplexedConnection, options: Options) {
    println!(
        "\nbatch forms: {BATCH} gcra decisions per EVALSHA, every key declared against the first only, {} in flight, {} rounds of {:?}",
        load::IN_FLIGHT,
        options.rounds,
        options.window
    );
    let policy = Policy::gcra("1000/1s", 999).expect("a valid policy");
    let script = Arc::new(redis::Script::new(&redlimit::__private::script_source(&policy, true)));
    let numbers = Arc::new(redlimit::__private::policy_argument(&policy, true));
    let (mut declared, mut first_only) = (Vec::new(), Vec::new());
    for round in 0..options.rounds {
        let run = options.run();
        for declare_all in if round % 2 == 0 { [true, false] } else { [false, true] } {
            let measured = measure(declare_all, &script, &numbers, admin, run).await;
            if declare_all { &mut declared } else { &mut first_only }.push(measured);
        }
    }
    let us =
        |runs: &[Measured]| runs.iter().map(|m| Measured { ops_per_s: m.server_us_per_call, ..*m }).collect::<Vec<_>>();
    let ratio = median_ratio(&us(&declared), &us(&first_only));
    let (d, f) = (Measured::mean(&declared), Measured::mean(&first_only));
    println!(
        "bench case=batch_forms/gcra declared_server_us_per_decision={:.2} first_only_server_us_per_decision={:.2} \
         declared_to_first_only={ratio:.3} declared_cpu_us_per_decision={:.2} first_only_cpu_us_per_decision={:.2}",
        d.server_us_per_call / BATCH as f64,
        f.server_us_per_call / BATCH as f64,
        d.server_cpu_us_per_op / BATCH as f64,
        f.server_cpu_us_per_op / BATCH as f64,
    );
}

/// Raw batches of [`BATCH`] calls on distinct users in one form.
async fn measure(
    declare_all: bool,
    script: &Arc<redis::Script>,
    numbers: &Arc<Vec<u8>>,
    admin: &mut MultiplexedConnection,
    options: Options,
) -> Measured {
    let con = admin.clone();
    flush(admin).await;
    let (script, numbers) = (script.clone(), numbers.clone());
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (script, numbers, mut con) = (script.clone(), numbers.clone(), con.clone());
        async move {
            let keys: Vec<String> = (0..BATCH).map(|j| format!("batch:{}", load::user(task, n * BATCH + j))).collect();
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(script.get_hash());
            // The count, no words (every call is the common call: cost 1, a
            // check, Redis's clock), the keys in ARGV when only the first is
            // declared, the one policy.
            if declare_all {
                cmd.arg(BATCH).arg(&keys).arg(BATCH).arg("");
            } else {
                cmd.arg(1).arg(&keys[0]).arg(BATCH).arg("").arg(&keys);
            }
            cmd.arg(&*numbers);
            // Every call answered: their 16-byte replies joined in one string.
            let replies: Vec<u8> = match cmd.query_async(&mut con).await {
                Ok(replies) => replies,
                // The first EVALSHA of a fresh server: load the script, then go on.
                Err(_) => {
                    script.prepare_invoke().load_async(&mut con).await.expect("SCRIPT LOAD");
                    cmd.query_async(&mut con).await.expect("raw batch")
                }
            };
            assert_eq!(replies.len() as u64, 16 * BATCH);
        }
    })
    .await
}
