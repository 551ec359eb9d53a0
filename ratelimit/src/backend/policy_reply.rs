//! The reply of a token bucket's, leaky bucket's or gcra's per-policy script
//! (`lua/set_state.lua`), turned into an [`Outcome`].
//!
//! The script answers with one number `v` and the time it decided at, packed
//! as two little-endian doubles (16 bytes): `v >= 0` allowed, `v < 0` denied,
//! and `v` (or `-1 - v`) counts in units, whole integers below 2^53, the
//! state the decision turned on (how far gcra's TAT is ahead of now, the
//! units a token bucket holds, a leaky bucket's level). With the policy's
//! constants and the call's cost, that one number gives every field, by the
//! same formulas as the in-process twins (`algo/*.rs`): Redis builds one
//! short string instead of a table of seven integers (issue 6: gcra from
//! 50 400 to 39 900 instructions per call).
//!
//! The time stays in the reply: with the server's clock it is Redis's
//! `TIME`, which [`Decision::decided_at`](crate::Decision::decided_at)
//! promises and the exactness check (`examples/exactness.rs`) replays.

use super::Outcome;
use crate::algo::ceil_div;
use crate::policy_scripts::PolicyScriptKey;
use crate::Error;
use ratelimit_grammar::AlgorithmKind;

/// Reads `reply`, the answer of the script made for `key` (the algorithm
/// and its constants: capacity or burst, n, p) to a call of `cost`.
pub(crate) fn outcome((kind, [first, n, p]): PolicyScriptKey, reply: &[u8], cost: u64) -> Result<Outcome, Error> {
    let malformed = |why: &str| Error::Protocol(format!("{kind} script replied {reply:?}: {why}"));
    if reply.len() != 16 {
        return Err(malformed("expected 16 bytes"));
    }
    let (v, now_us) = (double(&reply[..8]), double(&reply[8..]));
    if !(v.is_finite() && v.fract() == 0.0 && now_us.is_finite() && now_us.fract() == 0.0 && now_us >= 0.0) {
        return Err(malformed("expected two integers"));
    }
    let allowed = v >= 0.0;
    // The state the decision turned on, in units (`as` saturates: a value
    // that large only comes from a clock run far backwards, where the
    // script's own arithmetic is no longer exact either).
    let x = if allowed { v } else { -1.0 - v } as u64;
    let (x, n, p) = (x as u128, n as u128, p as u128);
    let (limit, remaining, reset_after, retry_after) = match kind {
        AlgorithmKind::Gcra | AlgorithmKind::LeakyBucket => {
            // x: how full the policy is, after the call if allowed, as it
            // stands if denied: gcra's debt (its tolerance holds burst + 1
            // permits), a leaky bucket's level (it holds its capacity).
            let limit = if kind == AlgorithmKind::Gcra { first + 1 } else { first };
            let full = limit as u128 * p;
            let retry = match (allowed, cost > limit) {
                (true, _) if x > full => return Err(malformed("more than the policy holds")),
                (false, false) if x + cost as u128 * p <= full => {
                    return Err(malformed("a denial of a cost that fits"))
                }
                (false, false) => Some(ceil_div(x + cost as u128 * p - full, n)),
                _ => None,
            };
            (limit, full.saturating_sub(x) / p, ceil_div(x, n), retry)
        }
        AlgorithmKind::TokenBucket => {
            // x: the units held, after the call if allowed.
            let full = first as u128 * p;
            if x > full {
                return Err(malformed("more units than the bucket holds"));
            }
            let retry = match (allowed, cost > first) {
                (false, false) if x >= cost as u128 * p => return Err(malformed("a denial of a cost that fits")),
                (false, false) => Some(ceil_div(cost as u128 * p - x, n)),
                _ => None,
            };
            (first, x / p, ceil_div(full - x, n), retry)
        }
        _ => return Err(malformed("not a script made per policy")),
    };
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

/// A little-endian double from 8 bytes.
fn double(bytes: &[u8]) -> f64 {
    f64::from_le_bytes(bytes.try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn token_bucket_fields_come_from_the_units_held() {
        // Capacity 10, 2 per 6 s: n = 1, p = 3 000 000 units per token.
        let key = (AlgorithmKind::TokenBucket, [10, 1, 3_000_000]);
        let allowed = outcome(key, &reply(27_000_000, 5), 1).unwrap();
        assert_eq!(
            (allowed.allowed, allowed.limit, allowed.remaining, allowed.reset_after_us),
            (true, 10, 9, 3_000_000)
        );
        let denied = outcome(key, &reply(-1 - 4_000_000, 5), 2).unwrap();
        assert_eq!(
            (denied.allowed, denied.remaining, denied.retry_after_us, denied.reset_after_us),
            (false, 1, Some(2_000_000), 26_000_000)
        );
        assert_eq!(outcome(key, &reply(-1 - 4_000_000, 5), 11).unwrap().retry_after_us, None);
        assert!(outcome(key, &reply(30_000_001, 5), 0).is_err(), "more than full");
        assert!(outcome(key, &reply(-1 - 4_000_000, 5), 1).is_err(), "a denial of what fits");
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
}
