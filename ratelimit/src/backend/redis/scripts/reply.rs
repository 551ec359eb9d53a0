//! Every script's reply, turned into an [`Outcome`]: one decoder per reply
//! family, chosen when a limiter is bound. The replies: `lua/README.md`.

use super::counter::Counter;
use crate::algo::paid_after;
use crate::backend::{Outcome, QuotaOutcome};
use crate::error::Error;
use redis::Value;
use redlimit_grammar::AlgorithmKind;

/// How a bound limiter reads its script's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// 7 integers, then a (remaining, reset, retry) triple per strategy
    /// when there are several (`quotas` of them, else 0), as packed doubles.
    Window { quotas: usize },
    /// 16 bytes from a bucket or gcra, whose constants are
    /// `[capacity or burst, n, p, refill step]` (the step 1 but for a
    /// token bucket refilled by interval).
    Bucket { kind: AlgorithmKind, constants: [u64; 4] },
    /// 16 bytes from the fixed window counter: the decision and its time.
    Counter(Counter),
}

impl Reply {
    /// The outcome of a call of `cost` that got `reply`.
    pub(crate) fn outcome(&self, reply: Value, cost: u64) -> Result<Outcome, Error> {
        let protocol = |e: redis::ParsingError| Error::Protocol(e.to_string());
        match *self {
            Reply::Window { quotas } => {
                window(&integers(&redis::from_redis_value::<Vec<u8>>(reply).map_err(protocol)?)?, quotas)
            }
            Reply::Bucket { kind, constants } => {
                bucket(kind, constants, &redis::from_redis_value::<Vec<u8>>(reply).map_err(protocol)?, cost)
            }
            Reply::Counter(counter) => {
                counted(counter, &redis::from_redis_value::<Vec<u8>>(reply).map_err(protocol)?, cost)
            }
        }
    }

    /// The bytes of one call's reply where a batch's replies come joined
    /// into one string (`lua/batch.lua`): a bucket's or the counter's 16;
    /// `None` for the families that reply a table.
    pub(crate) fn joined_width(&self) -> Option<usize> {
        match self {
            Reply::Bucket { .. } | Reply::Counter(_) => Some(16),
            Reply::Window { .. } => None,
        }
    }

    /// The outcome of a call of `cost` whose reply is `bytes`, its part of
    /// a batch's joined replies.
    pub(crate) fn joined_outcome(&self, bytes: &[u8], cost: u64) -> Result<Outcome, Error> {
        match *self {
            Reply::Bucket { kind, constants } => bucket(kind, constants, bytes, cost),
            Reply::Counter(counter) => counted(counter, bytes, cost),
            Reply::Window { .. } => {
                Err(Error::Protocol(format!("a {self:?} reply came joined with others: {bytes:?}")))
            }
        }
    }
}

/// Reads a window reply: 7 integers, then `quotas` triples.
fn window(reply: &[i64], quotas: usize) -> Result<Outcome, Error> {
    let Some((&[allowed, limit, remaining, reset_after_us, retry_after_us, violated, now_us], triples)) =
        reply.split_first_chunk::<7>().filter(|(_, rest)| rest.len() == 3 * quotas)
    else {
        return Err(Error::Protocol(format!("expected {} integers, got {reply:?}", 7 + 3 * quotas)));
    };
    let non_negative = |v: i64| u64::try_from(v).map_err(|_| Error::Protocol(format!("negative field in {reply:?}")));
    let quotas = triples
        .chunks_exact(3)
        .map(|t| {
            let retry_after_us = if t[2] < 0 { None } else { Some(t[2] as u64) };
            Ok(QuotaOutcome { remaining: non_negative(t[0])?, reset_after_us: non_negative(t[1])?, retry_after_us })
        })
        .collect::<Result<_, Error>>()?;
    Ok(Outcome {
        allowed: allowed == 1,
        limit: non_negative(limit)?,
        remaining: non_negative(remaining)?,
        reset_after_us: non_negative(reset_after_us)?,
        retry_after_us: if retry_after_us < 0 { None } else { Some(retry_after_us as u64) },
        violated: violated as u32,
        now_us: non_negative(now_us)?,
        quotas,
    })
}

/// Reads the counter's reply, two little-endian doubles: the decision
/// (`count × (W + 2) + t`, negated as `-1 - v` for a denial) and Redis's
/// time, which dates it.
fn counted(counter: Counter, bytes: &[u8], cost: u64) -> Result<Outcome, Error> {
    let malformed = || Error::Protocol(format!("fixed window counter replied {bytes:?}: expected two integers"));
    let [v, now] = pair(bytes).filter(|[v, _]| v.abs() < 2f64.powi(53)).ok_or_else(malformed)?;
    let (reply, now_us) = (v as i64, now as u64);
    let allowed = reply >= 0;
    let packed = if allowed { reply } else { -1 - reply } as u64;
    let radix = counter.window_ms + 2;
    let (count, t_ms) = (packed / radix, packed % radix);
    if count > counter.limit {
        return Err(Error::Protocol(format!(
            "fixed window counter replied {reply}: a count of {count} above the limit {}",
            counter.limit
        )));
    }
    // t = PTTL + 1 while a window runs, 0 when none does.
    let reset_after_us = t_ms.saturating_sub(1) * 1000;
    // A denial of a cost the window can hold names when the key is gone
    // for certain: the script only denies such a cost while a window runs.
    let retry_after_us = (!allowed && cost <= counter.limit).then_some(t_ms * 1000);
    Ok(Outcome {
        allowed,
        limit: counter.limit,
        remaining: counter.limit - count,
        reset_after_us,
        retry_after_us,
        violated: u32::from(!allowed),
        now_us,
        quotas: Vec::new(),
    })
}

/// Reads the bucket reply of `kind`'s script, whose constants are
/// `[capacity or burst, n, p, refill step]`, to a call of `cost`.
fn bucket(kind: AlgorithmKind, [first, n, p, step]: [u64; 4], reply: &[u8], cost: u64) -> Result<Outcome, Error> {
    let malformed = |why: &str| Error::Protocol(format!("{kind} script replied {reply:?}: {why}"));
    let [v, now_us] = pair(reply).ok_or_else(|| malformed("expected two integers in 16 bytes"))?;
    let allowed = v >= 0.0;
    // The state the decision turned on, in units (`as` saturates: a value
    // that large only comes from a clock run far backwards, where the
    // script's own arithmetic is no longer exact either).
    let x = if allowed { v } else { -1.0 - v } as u64;
    let now = now_us as u64;
    let wait = |units: u128| paid_after(units, n, step, now) as u128;
    let (x, p) = (x as u128, p as u128);
    let limit = match kind {
        AlgorithmKind::Gcra => first + 1,
        AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket => first,
        _ => return Err(malformed("not a bucket's script")),
    };
    // x: what the key owes, after the call if allowed, as it stands if
    // denied: gcra's debt (its tolerance holds burst + 1 permits), a token
    // bucket's units missing to be full, a leaky bucket's level (each
    // holds its capacity). A denial may find more owed than this policy
    // holds: a larger plan's debt, kept whole.
    let full = limit as u128 * p;
    let retry = match (allowed, cost > limit) {
        (true, _) if x > full => return Err(malformed("more than the policy holds")),
        (false, false) if x + cost as u128 * p <= full => return Err(malformed("a denial of a cost that fits")),
        (false, false) => Some(wait(x + cost as u128 * p - full)),
        _ => None,
    };
    let (remaining, reset_after, retry_after) = (full.saturating_sub(x) / p, wait(x), retry);
    Ok(Outcome {
        allowed,
        limit,
        remaining: remaining as u64,
        reset_after_us: reset_after as u64,
        retry_after_us: retry_after.map(|r| r as u64),
        violated: 0,
        now_us: now_us as u64,
        quotas: Vec::new(),
    })
}

/// A window reply's numbers: little-endian doubles, each an integer.
fn integers(bytes: &[u8]) -> Result<Vec<i64>, Error> {
    let malformed = || Error::Protocol(format!("window script replied {bytes:?}: expected integers as doubles"));
    if bytes.len() % 8 != 0 {
        return Err(malformed());
    }
    let whole = |d: f64| (d.fract() == 0.0 && d.abs() < 2f64.powi(63)).then_some(d as i64);
    bytes
        .chunks_exact(8)
        .map(|b| whole(f64::from_le_bytes(b.try_into().expect("8 bytes"))).ok_or_else(malformed))
        .collect()
}

/// The two numbers of a bucket or counter reply, 16 bytes of little-endian
/// doubles, when both are integers and the second (a time) is not negative.
fn pair(bytes: &[u8]) -> Option<[f64; 2]> {
    let (v, now) = bytes.split_first_chunk::<8>()?;
    let (v, now) = (f64::from_le_bytes(*v), f64::from_le_bytes(now.try_into().ok()?));
    (v.is_finite() && v.fract() == 0.0 && now.is_finite() && now.fract() == 0.0 && now >= 0.0).then_some([v, now])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket decoder of `kind` with `constants`.
    fn outcome((kind, [first, n, p]): (AlgorithmKind, [u64; 3]), reply: &[u8], cost: u64) -> Result<Outcome, Error> {
        bucket(kind, [first, n, p, 1], reply, cost)
    }

    /// What the script sends: `v` and `now` as two little-endian doubles.
    fn reply(v: i64, now: u64) -> Vec<u8> {
        [(v as f64).to_le_bytes(), (now as f64).to_le_bytes()].concat()
    }

    #[test]
    fn gcra_fields_come_from_the_debt() {
        // 3 per 1 s, burst 2: n = 3, p = 1 000 000 units per emission, tolerance 3p.
        let key = (AlgorithmKind::Gcra, [2, 3, 1_000_000]);
        let allowed = outcome(key, &reply(2_000_001, 7), 1).unwrap();
        assert_eq!((allowed.allowed, allowed.limit, allowed.remaining, allowed.retry_after_us), (true, 3, 0, None));
        assert_eq!(
            (allowed.reset_after_us, allowed.now_us, allowed.violated),
            (666_667, 7, 0),
            "ceil(2 000 001 / 3) µs"
        );
        // Denied with a debt of 2.5 emissions: the next permit in ceil(0.5p / 3) µs.
        let denied = outcome(key, &reply(-1 - 2_500_000, 7), 1).unwrap();
        assert_eq!(
            (denied.allowed, denied.remaining, denied.reset_after_us, denied.retry_after_us),
            (false, 0, 833_334, Some(166_667))
        );
        // A cost above the limit never passes: no retry.
        let never = outcome(key, &reply(-1, 7), 4).unwrap();
        assert_eq!((never.allowed, never.remaining, never.reset_after_us, never.retry_after_us), (false, 3, 0, None));
        assert!(outcome(key, &reply(3_000_001, 7), 1).is_err(), "a debt above the tolerance is not this script's");
        assert!(outcome(key, &reply(-1, 7), 1).is_err(), "a denial of what fits is not this script's");
    }

    #[test]
    fn token_bucket_fields_come_from_the_units_missing() {
        // Capacity 10, 2 per 6 s: n = 1, p = 3 000 000 units per token.
        let key = (AlgorithmKind::TokenBucket, [10, 1, 3_000_000]);
        let allowed = outcome(key, &reply(3_000_000, 5), 1).unwrap();
        assert_eq!(
            (allowed.allowed, allowed.limit, allowed.remaining, allowed.reset_after_us),
            (true, 10, 9, 3_000_000)
        );
        // 26 of 30 units missing: 4 held, 1 token and a third.
        let denied = outcome(key, &reply(-1 - 26_000_000, 5), 2).unwrap();
        assert_eq!(
            (denied.allowed, denied.remaining, denied.retry_after_us, denied.reset_after_us),
            (false, 1, Some(2_000_000), 26_000_000)
        );
        assert_eq!(outcome(key, &reply(-1 - 26_000_000, 5), 11).unwrap().retry_after_us, None);
        // A larger plan's debt, above this capacity: nothing left, and the retry pays it off.
        let owing = outcome(key, &reply(-1 - 60_000_000, 5), 1).unwrap();
        assert_eq!((owing.remaining, owing.retry_after_us, owing.reset_after_us), (0, Some(33_000_000), 60_000_000));
        assert!(outcome(key, &reply(30_000_001, 5), 0).is_err(), "more than full");
        assert!(outcome(key, &reply(-1 - 26_000_000, 5), 1).is_err(), "a denial of what fits");
    }

    #[test]
    fn leaky_bucket_fields_come_from_the_level() {
        // Capacity 5, 7 per 3 s: n = 7, p = 3 000 000.
        let key = (AlgorithmKind::LeakyBucket, [5, 7, 3_000_000]);
        let allowed = outcome(key, &reply(6_000_000, 5), 1).unwrap();
        assert_eq!((allowed.allowed, allowed.limit, allowed.remaining, allowed.reset_after_us), (true, 5, 3, 857_143));
        let denied = outcome(key, &reply(-1 - 14_000_000, 5), 1).unwrap();
        assert_eq!((denied.remaining, denied.retry_after_us, denied.reset_after_us), (0, Some(285_715), 2_000_000));
        assert!(outcome(key, &reply(15_000_001, 5), 1).is_err(), "above capacity");
    }

    #[test]
    fn rejects_what_no_script_sends() {
        let key = (AlgorithmKind::Gcra, [2, 3, 1_000_000]);
        assert!(outcome(key, &[0; 15], 1).is_err());
        assert!(outcome(key, &[(0.5f64).to_le_bytes(), 1f64.to_le_bytes()].concat(), 1).is_err());
        assert!(outcome(key, &[0f64.to_le_bytes(), f64::NAN.to_le_bytes()].concat(), 1).is_err());
        assert!(outcome((AlgorithmKind::SlidingLog, [1, 1, 1]), &reply(0, 1), 1).is_err());
    }

    #[test]
    fn rejects_malformed_window_replies() {
        assert!(window(&[1, 2, 3], 0).is_err());
        assert!(window(&[1, -2, 3, 4, -1, 0, 9], 0).is_err());
        assert_eq!(window(&[0, 5, 0, 10, 7, 2, 9], 0).unwrap().retry_after_us, Some(7));
        // Quota triples: exactly as many as strategies, none negative but a retry (-1 = none).
        assert!(window(&[0, 5, 0, 10, 7, 2, 9], 2).is_err());
        assert!(window(&[0, 5, 0, 10, 7, 2, 9, 1, 2, -1], 2).is_err());
        assert!(window(&[0, 5, 0, 10, 7, 2, 9, 1, 2, -1, -3, 4, 7], 2).is_err());
        let quota =
            |remaining, reset_after_us, retry_after_us| QuotaOutcome { remaining, reset_after_us, retry_after_us };
        let two = window(&[0, 5, 0, 10, 7, 2, 9, 1, 2, -1, 0, 4, 7], 2).unwrap();
        assert_eq!(two.quotas, [quota(1, 2, None), quota(0, 4, Some(7))]);
    }

    #[test]
    fn reads_allowed_denied_and_idle_counter_replies() {
        let counter = Counter { limit: 10, window_ms: 1000 };
        // 3 taken, PTTL 399 ms.
        let allowed = counted(counter, &reply(3 * 1002 + 400, 7), 1).unwrap();
        assert_eq!(
            (allowed.allowed, allowed.remaining, allowed.reset_after_us, allowed.retry_after_us),
            (true, 7, 399_000, None)
        );
        assert_eq!((allowed.violated, allowed.now_us, allowed.limit), (0, 7, 10));
        let denied = counted(counter, &reply(-1 - (10 * 1002 + 250), 7), 1).unwrap();
        assert_eq!(
            (denied.allowed, denied.remaining, denied.retry_after_us, denied.violated),
            (false, 0, Some(250_000), 1)
        );
        assert_eq!(denied.reset_after_us, 249_000, "PTTL, where retry adds the ms Redis may keep the key");
        // A cost above the limit never passes: no retry time.
        let never = counted(counter, &reply(-1 - (2 * 1002 + 250), 7), 11).unwrap();
        assert_eq!((never.allowed, never.remaining, never.retry_after_us), (false, 8, None));
        // Nothing counted and no window: untouched.
        let idle = counted(counter, &reply(0, 7), 0).unwrap();
        assert_eq!((idle.allowed, idle.remaining, idle.reset_after_us), (true, 10, 0));
        assert!(
            counted(counter, &reply(11 * 1002, 7), 1).is_err(),
            "a count above the limit is not this script's reply"
        );
    }

    #[test]
    fn a_reply_of_another_family_is_a_protocol_error() {
        let window = Reply::Window { quotas: 0 };
        assert!(window.outcome(Value::BulkString(vec![0; 16]), 1).is_err());
        let packed = |v: &[f64]| Value::BulkString(v.iter().flat_map(|d| d.to_le_bytes()).collect());
        let denied = window.outcome(packed(&[0.0, 5.0, 0.0, 10.0, 7.0, 1.0, 9.0]), 1).unwrap();
        assert_eq!((denied.allowed, denied.limit, denied.retry_after_us, denied.now_us), (false, 5, Some(7), 9));
        assert!(window.outcome(packed(&[0.0, 5.0, 0.0, 10.0, 7.5, 1.0, 9.0]), 1).is_err(), "not an integer");
        assert!(window.outcome(Value::BulkString(vec![0; 57]), 1).is_err(), "not whole doubles");
        let table = Value::Array([0, 5, 0, 10, 7, 1, 9].map(Value::Int).to_vec());
        assert!(window.outcome(table, 1).is_err(), "a table");
        let counter = Reply::Counter(Counter { limit: 10, window_ms: 1000 });
        assert!(counter.outcome(Value::Array(vec![Value::Int(1002 + 400), Value::Int(7)]), 1).is_err(), "a table");
        assert!(counter.outcome(Value::BulkString((1002.0f64 + 400.0).to_le_bytes().to_vec()), 1).is_err(), "undated");
        assert!(counter
            .outcome(Value::BulkString([(1402f64).to_le_bytes(), (-5f64).to_le_bytes()].concat()), 1)
            .is_err());
        assert!(counter
            .outcome(Value::BulkString([(0.5f64).to_le_bytes(), (7f64).to_le_bytes()].concat()), 1)
            .is_err());
        let dated = counter.outcome(Value::BulkString(reply(1002 + 400, 1_767_225_600_000_000)), 1);
        assert_eq!(dated.unwrap().now_us, 1_767_225_600_000_000, "Redis's time dates the decision");
    }
}
