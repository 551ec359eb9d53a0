//! The in-memory twin of each Lua script: pure `(state, now, cost) -> (outcome, state)`.
//!
//! Each file mirrors `lua/<algo>.lua` line for line in meaning; the parity
//! tests replay random timelines on both and compare every field. All
//! arithmetic is on integers (microseconds, or units scaled by a reduced
//! rate) so both sides compute exactly the same numbers.

mod bucket;
mod concurrency;
mod fixed_window;
mod gcra;
mod sliding_log;
mod sliding_window;

#[cfg(all(test, feature = "redis"))]
pub(crate) use sliding_log::MAX_ENTRIES as SLIDING_LOG_MAX_ENTRIES;

use crate::backend::{CallKind, Outcome, QuotaOutcome};
use crate::error::Error;
use crate::policy::{Params, Policy, Strategy};
use redlimit_grammar::AlgorithmKind;

/// A key's state in the memory backend, one variant per algorithm.
#[derive(Debug, Clone)]
pub(crate) enum State {
    FixedWindow(fixed_window::Windows),
    SlidingWindow(sliding_window::SubWindows),
    SlidingLog(sliding_log::Log),
    TokenBucket(bucket::Bucket),
    LeakyBucket(bucket::Bucket),
    Gcra(gcra::Tat),
    /// Boxed: its maps are larger than every other state, and each key's
    /// slot in the memory store is as large as the largest variant.
    Concurrency(Box<concurrency::Holders>),
}

/// Whether `algorithm` can give permits back ([`CallKind::Refund`]): its
/// state says how many permits are held now, and no more. The sliding
/// window and log record when permits were taken; a refund does not say
/// which call it is for, nor whether that call still counts, and lowering
/// the newest would free room the refunded call no longer held.
/// A concurrency limiter's permits are given back by releasing them.
pub(crate) fn refunds(algorithm: AlgorithmKind) -> bool {
    !matches!(algorithm, AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog | AlgorithmKind::Concurrency)
}

/// Why a concurrency limiter refuses `check`, `limit` and `wait`.
pub(crate) const CHECK_HOLDS_NOTHING: &str = "`check`, `limit` and `wait` hold no permit of a concurrency limiter, \
     so they would say allowed and bound nothing: take a permit with `Limiter::acquire` (or `acquire_wait`), held \
     until it is dropped; `peek` says how many are free";

/// The error of a refund under a policy whose algorithm keeps none.
pub(crate) fn refund_refused(algorithm: AlgorithmKind) -> Error {
    if algorithm == AlgorithmKind::Concurrency {
        return Error::InvalidConfig(
            "a concurrency limiter's permits are not refunded: a permit is given back when it is dropped or \
             released (Limiter::acquire)"
                .into(),
        );
    }
    Error::InvalidConfig(format!(
        "a {algorithm} limiter cannot give permits back: it records when each permit was taken, and a refund \
         cannot say which; refunds work with fixed_window, token_bucket, leaky_bucket and gcra"
    ))
}

/// Why a store refuses a call of `kind` under `algorithm`, writing nothing:
/// a refund its state cannot make ([`refunds`]), a permit's call under an
/// algorithm that holds none, or a check under one whose permits are held
/// (it would take nothing and say allowed).
#[inline]
pub(crate) fn refused(algorithm: AlgorithmKind, kind: CallKind) -> Option<Error> {
    match kind {
        CallKind::Check if algorithm == AlgorithmKind::Concurrency => Some(Error::Misuse(CHECK_HOLDS_NOTHING.into())),
        CallKind::Refund(_) | CallKind::Charge if !refunds(algorithm) => Some(refund_refused(algorithm)),
        CallKind::Acquire(_) | CallKind::Release(_) | CallKind::Renew(_) if algorithm != AlgorithmKind::Concurrency => {
            Some(Error::InvalidConfig(format!(
                "a {algorithm} limiter holds no permits: acquire them from a concurrency limiter"
            )))
        }
        _ => None,
    }
}

/// Decides one call; also whether it wrote `state`. `state` is `None` for
/// an untouched key; the caller drops the key once `reset_after_us` has
/// passed. A refund reaches only the algorithms that keep one ([`refunds`]);
/// any other takes it as a peek of its cost.
///
/// Inlined into the store: the buckets and GCRA (a few integers) are decided
/// in place; the windows' code is kept out of line.
#[inline(always)]
pub(crate) fn decide(
    policy: &Policy,
    state: &mut Option<State>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    // A state of another algorithm (the policy behind a name changed) counts as untouched.
    macro_rules! run {
        ($module:ident, $variant:ident, $($param:expr),*) => {{
            let mut current = match state.take() {
                Some(State::$variant(s)) => Some(s),
                _ => None,
            };
            let outcome = $module::decide($($param,)* &mut current, now, cost, kind);
            *state = current.map(State::$variant);
            outcome
        }};
    }
    // The sliding ones, which take a check or a peek only.
    macro_rules! run_sliding {
        ($module:ident, $variant:ident, $($param:expr),*) => {{
            let mut current = match state.take() {
                Some(State::$variant(s)) => Some(s),
                _ => None,
            };
            let outcome = $module::decide($($param,)* &mut current, now, cost, kind != CallKind::Check);
            *state = current.map(State::$variant);
            let wrote = outcome.allowed && cost > 0 && kind == CallKind::Check;
            (outcome, wrote)
        }};
    }
    // A state of two integers is copied out and written back in place, not
    // moved out of the entry and back with the whole enum.
    macro_rules! run_copied {
        ($module:ident, $variant:ident, $($param:expr),*) => {{
            let mut current = match state {
                Some(State::$variant(s)) => Some(*s),
                _ => None,
            };
            let outcome = $module::decide($($param,)* &mut current, now, cost, kind);
            match (state, current) {
                (Some(State::$variant(s)), Some(c)) => *s = c,
                (state, current) => *state = current.map(State::$variant),
            }
            outcome
        }};
    }
    let rate = policy.reduced_rate;
    match &policy.params {
        Params::FixedWindow { strategies } => run!(fixed_window, FixedWindow, strategies),
        Params::SlidingWindow { strategies, precision_us } => {
            run_sliding!(sliding_window, SlidingWindow, strategies, *precision_us)
        }
        Params::SlidingLog { strategies } => run_sliding!(sliding_log, SlidingLog, strategies),
        Params::TokenBucket { capacity, .. } => {
            run_copied!(bucket, TokenBucket, *capacity, rate, policy.refill_step())
        }
        Params::LeakyBucket { capacity, .. } => run_copied!(bucket, LeakyBucket, *capacity, rate, 1),
        Params::Gcra { burst, .. } => run_copied!(gcra, Gcra, *burst, rate),
        Params::Concurrency { limit, lease_us } => {
            // The box is kept for the state written back: no allocation per call.
            let mut boxed = match state.take() {
                Some(State::Concurrency(s)) => Some(s),
                _ => None,
            };
            let mut current = boxed.as_deref_mut().map(std::mem::take);
            let outcome = concurrency::decide(*limit, *lease_us, &mut current, now, cost, kind);
            *state = current.map(|holders| match boxed {
                Some(mut held) => {
                    *held = holders;
                    State::Concurrency(held)
                }
                None => State::Concurrency(Box::new(holders)),
            });
            outcome
        }
    }
}

/// The most a charge ([`CallKind::Charge`]) leaves a key owing, in units or
/// permits: a debt this large is centuries of waiting, and it stays exact
/// in the scripts' doubles added to any time of this era.
pub(crate) const MOST_OWED: u64 = 1 << 52;

/// What a key owes after a charge of `cost` permits of `p` units each:
/// never less than it owed, at most [`MOST_OWED`] (the scripts compute it
/// in doubles, exact below that bound, and cap alike).
pub(crate) fn charged(owed: u64, cost: u64, p: u64) -> u64 {
    let more = (owed as u128 + cost as u128 * p as u128).min(MOST_OWED as u128) as u64;
    owed.max(more)
}

/// Units owed under a rate whose period was `was_p` (one permit = `was_p`
/// units), counted under one of period `p`: the same permits, rounded up,
/// so a change of rate never gives more room. Computed in doubles, the
/// operations in the scripts' order, so both stores get the same number.
pub(crate) fn owed_under(owed: u64, was_p: u64, p: u64) -> u64 {
    if was_p == p {
        return owed;
    }
    (owed as f64 / was_p as f64 * p as f64).ceil() as u64
}

/// How a bucket is paid off: `n` units per µs, one permit being `p` units,
/// in steps of `step` µs ([`counted`]; 1 is continuous).
pub(crate) type Pace = (u64, u64, u64);

/// A bucket's debt and when it was counted, as a call at `now` under the
/// rate `(n, p)` finds them: under another rate the debt is first paid off
/// at the old pace up to `now` (by its own refill), then counted in the new
/// rate's units (`lua/bucket_read.lua`). The same rate refilled another way
/// keeps its debt as counted, each refill paying from then.
pub(crate) fn owed_at(owed: u64, last: u64, was: Pace, (n, p): (u64, u64), now: u64) -> (u64, u64) {
    let (was_n, was_p, was_step) = was;
    if (was_n, was_p) == (n, p) || now <= last {
        return (owed_under(owed, was_p, p), last);
    }
    let paid = counted(last, now, was_step) as u128 * was_n as u128;
    let owed = if paid >= owed as u128 { 0 } else { owed - paid as u64 };
    (owed_under(owed, was_p, p), now)
}

/// The units a refund of `cost` permits, taken at `taken_us`, may give back
/// at `now` under the rate `(n, p)`: what the call added (`cost * p`) less
/// what could have been paid off since, never below zero. What a bucket
/// owes falls at most at its rate, so removing the call would have lowered
/// today's debt by at least this: a late refund never gives more than the
/// state would have had without the call. gcra's TAT moves back by as much
/// (`cost` emission intervals less the time since).
///
/// Under an interval refill (`step` above 1, [`counted`]) only the periods
/// that ended since the call paid anything.
///
/// `was` is the pace the state was last written at: when it is another
/// (another rate, or the same rate refilled another way), the debt is
/// taken to have fallen at the faster of the two, the other's counted in
/// this rate's units rounded up (less back), in doubles in the scripts'
/// order so both stores get the same number.
pub(crate) fn refunded_units(cost: u64, taken_us: u64, pace: Pace, was: Pace, now: u64) -> u64 {
    let (n, p, step) = pace;
    let added = cost as u128 * p as u128;
    let mut paid = counted(taken_us, now, step) as u128 * n as u128;
    if was != pace {
        let (was_n, was_p, was_step) = was;
        let was_paid = counted(taken_us, now, was_step) as f64 * was_n as f64 / was_p as f64 * p as f64;
        paid = paid.max(was_paid.ceil() as u128);
    }
    u64::try_from(added.saturating_sub(paid)).unwrap_or(u64::MAX)
}

/// The µs from `from` to `to` that a bucket refilling by `step` has been
/// paid for: all of them when `step` is 1 (continuous), else the periods
/// (of `step` µs, counted from the epoch) that ended in between, whole.
pub(crate) fn counted(from: u64, to: u64, step: u64) -> u64 {
    if to <= from {
        return 0;
    }
    (to - to % step) - (from - from % step)
}

/// The µs from `now` until a bucket refilling `n` units per µs by `step`
/// has paid `units`: at once for none, else at the end of the period that
/// pays the last of them (`lua/bucket_state.lua`'s `wait`).
pub(crate) fn paid_after(units: u128, n: u64, step: u64, now: u64) -> u64 {
    if units == 0 {
        return 0;
    }
    let us = ceil_div(units, n as u128);
    if step == 1 {
        return us as u64;
    }
    (ceil_div(us, step as u128) * step as u128 - (now % step) as u128) as u64
}

/// `ceil(a / b)` on integers.
pub(crate) fn ceil_div(a: u128, b: u128) -> u128 {
    // Nearly always both fit in 64 bits, where division is a single
    // instruction rather than a call into the 128-bit routine.
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) => a.div_ceil(b) as u128,
        _ => a.div_ceil(b),
    }
}

/// A window algorithm's verdict on a call: whether every strategy has room,
/// whether one never can (a cost above its limit), and which have none.
pub(crate) struct WindowVerdict {
    pub allowed: bool,
    pub never: bool,
    pub violated: u32,
}

impl WindowVerdict {
    /// The call's outcome, with `(limit, remaining)` from [`least_room`].
    pub(crate) fn outcome(
        &self,
        (limit, remaining): (u64, u64),
        (reset_after_us, retry_after_us): (u64, Option<u64>),
        now_us: u64,
        quotas: Vec<QuotaOutcome>,
    ) -> Outcome {
        let violated = if self.allowed { 0 } else { self.violated };
        Outcome { allowed: self.allowed, limit, remaining, reset_after_us, retry_after_us, violated, now_us, quotas }
    }
}

/// Shared admission rule of the window algorithms: every strategy must fit
/// `count + cost <= limit`; a cost above any limit can never pass.
pub(crate) fn judge(strategies: &[Strategy], counts: impl IntoIterator<Item = u64>, cost: u64) -> WindowVerdict {
    let mut violated = 0u32;
    let mut never = false;
    for (i, (s, c)) in strategies.iter().zip(counts).enumerate() {
        if cost > s.limit {
            never = true;
        }
        if c.saturating_add(cost) > s.limit {
            violated |= 1 << i;
        }
    }
    WindowVerdict { allowed: violated == 0, never, violated }
}

/// On a denial that a wait can cure, each strategy's own retry time (`own`,
/// asked of the violated ones only; `None` for the others) and the call's,
/// the latest of them. `(None, [])` otherwise.
pub(crate) fn retry_times(
    strategies: &[Strategy],
    verdict: &WindowVerdict,
    own: impl Fn(usize, &Strategy) -> u64,
) -> (Option<u64>, Vec<Option<u64>>) {
    if verdict.allowed || verdict.never {
        return (None, Vec::new());
    }
    let each: Vec<Option<u64>> =
        strategies.iter().enumerate().map(|(i, s)| (verdict.violated >> i & 1 == 1).then(|| own(i, s))).collect();
    (Some(each.iter().flatten().copied().max().unwrap_or(0)), each)
}

/// `(limit, remaining)` of the strategy with the least room after the call.
pub(crate) fn least_room(strategies: &[Strategy], counts_after: impl IntoIterator<Item = u64>) -> (u64, u64) {
    let mut best: Option<(u64, u64)> = None;
    for (s, c) in strategies.iter().zip(counts_after) {
        let remaining = s.limit.saturating_sub(c);
        if best.is_none_or(|(_, r)| remaining < r) {
            best = Some((s.limit, remaining));
        }
    }
    best.unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    use super::refunded_units;

    #[test]
    fn a_refund_gives_back_what_its_call_added_less_what_was_paid_since() {
        // 1 per second: a token is 1 000 000 units, 1 paid per µs.
        let rate = (1, 1_000_000, 1);
        assert_eq!(refunded_units(3, 5, rate, rate, 5), 3_000_000, "right away: all of it");
        assert_eq!(refunded_units(3, 5, rate, rate, 1_000_005), 2_000_000, "a second later: two");
        assert_eq!(refunded_units(3, 5, rate, rate, 3_000_005), 0, "paid off: nothing");
        assert_eq!(refunded_units(3, 5, rate, rate, 0), 3_000_000, "a clock behind the call: no time passed");
        // The state was written at 10 per second, the faster: it paid 10 tokens per second.
        assert_eq!(refunded_units(3, 0, rate, (1, 100_000, 1), 200_000), 1_000_000);
        // Written at a slower rate: this one's pace still bounds it.
        assert_eq!(refunded_units(3, 0, rate, (1, 10_000_000, 1), 1_000_000), 2_000_000);
        let huge = (u64::MAX, u64::MAX, 1);
        assert_eq!(refunded_units(u64::MAX, 0, huge, rate, u64::MAX), 0, "no overflow");
        let slow = (1, u64::MAX, 1);
        assert_eq!(refunded_units(u64::MAX, 0, slow, slow, 0), u64::MAX, "saturates");
        // Refilled by 3-second intervals: only a period's end pays, all of a period at once.
        let by_3s = (1, 1_000_000, 3_000_000);
        assert_eq!(refunded_units(3, 2_999_999, by_3s, by_3s, 2_999_999 + 2_000_000), 0, "an end passed");
        assert_eq!(refunded_units(3, 3_000_000, by_3s, by_3s, 5_999_999), 3_000_000, "none ended yet");
        // The state was written by the interval refill, whose period's end
        // paid all of it; a continuous refund a µs later gives back nothing.
        assert_eq!(refunded_units(3, 2_999_999, rate, by_3s, 3_000_001), 0, "the interval paid it");
    }
}
