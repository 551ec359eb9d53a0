//! The naive forms a first Lua limiter would write (GCRA with TIME + GET +
//! SET; a token bucket of four calls), run in the same run as our scripts,
//! so their server times can be compared on any machine.

use crate::load::{self, drive, Measured};
use crate::{flush, Options};
use redis::aio::MultiplexedConnection;
use std::sync::Arc;

/// GCRA as a first Lua limiter writes it: the server's clock, the arrival
/// time read and written as text with its TTL, nothing returned. Seven ARGV
/// (now, cost, peek, slack, burst, n, p), as the window scripts take theirs;
/// ours has its constants written in and takes none on the common call.
pub const NAIVE_GCRA: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval = ARGV[7] / ARGV[6]
local tolerance = (ARGV[5] + 1) * interval
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new = tat + ARGV[2] * interval
if new - now <= tolerance then
  redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1000))
end
return 0
";

/// A token bucket in four calls: TIME, HMGET of tokens and time, HSET, PEXPIRE.
pub const NAIVE_TOKEN_BUCKET: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local capacity, n, p = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(h[1]) or capacity, tonumber(h[2]) or now
tokens = math.min(capacity, tokens + (now - ts) * n / p)
local allowed = tokens >= tonumber(ARGV[2])
if allowed then tokens = tokens - tonumber(ARGV[2]) end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) * p / n / 1000) + 1)
return {allowed and 1 or 0, math.floor(tokens)}
";

/// Raw EVALSHA of `source` with `params` after `"", cost 1, peek 0, slack 0`.
pub async fn measure(
    source: &'static str,
    params: &[u64],
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
) -> Measured {
    let script = Arc::new(redis::Script::new(source));
    let keys = Arc::new((0..load::USERS).map(|u| format!("naive:user:{u}")).collect::<Vec<_>>());
    let params: Arc<[u64]> = params.into();
    let con = con.clone();
    flush(admin).await;
    drive(admin, load::IN_FLIGHT, options.warmup, options.window, move |task, n| {
        let (script, keys, params, mut con) = (script.clone(), keys.clone(), params.clone(), con.clone());
        async move {
            let mut invocation = script.key(&keys[load::user(task, n) as usize]);
            invocation.arg("").arg(1).arg(0).arg(0);
            for p in params.iter() {
                invocation.arg(*p);
            }
            let _: redis::Value = invocation.invoke_async(&mut con).await.expect("naive EVALSHA");
        }
    })
    .await
}

/// Our script and the naive form of `algo`, in turn for `options.rounds`
/// runs: the median server µs per call of each.
pub async fn server_times(
    algo: &crate::cases::Algo,
    naive: &'static str,
    admin: &mut MultiplexedConnection,
    con: &MultiplexedConnection,
    options: Options,
) -> (f64, f64) {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..options.rounds {
        ours.push(crate::measure_script(algo, admin, con, options.run()).await.server_us_per_call);
        theirs.push(measure(naive, &algo.params, admin, con, options.run()).await.server_us_per_call);
    }
    (median(&mut ours), median(&mut theirs))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
