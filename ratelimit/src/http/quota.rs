//! The quota policies a [`Policy`] advertises: one `(name, q, w)` per rule,
//! with `w` in whole seconds as the `RateLimit-Policy` field requires.

use crate::policy::Params;
use crate::{Decision, Policy};
use std::time::Duration;

const SECOND_US: u128 = 1_000_000;

/// One rule of a policy as the `RateLimit-Policy` field states it.
///
/// Window algorithms give one item per strategy (`10/1s` is `q=10;w=1`).
/// Buckets and GCRA have no window, so one is derived from their parameters:
///
/// | algorithm | `q` | window |
/// |---|---|---|
/// | `token_bucket`, `leaky_bucket` | `capacity` | the time the rate takes to refill (drain) the whole capacity |
/// | `gcra` | `burst + 1` | the time `burst + 1` emissions take at the rate |
///
/// `w` is whole seconds, so windows that are not are restated:
/// - a whole number of seconds is kept (`10/1m` is `q=10;w=60`);
/// - a window that divides one second is scaled up to one second with the
///   same rate (`10/100ms` is `q=100;w=1`); the burst a client may send at
///   once is still the policy's own count per sub-second window;
/// - any other window is rounded up to the next whole second and `q` kept
///   (`10/1500ms` is `q=10;w=2`): a client that paces itself at `q` per `w`
///   is never denied by that rule.
///
/// ```
/// use redlimit::http::PolicyItem;
/// use redlimit::Policy;
///
/// let items = PolicyItem::of(&Policy::fixed_window("10/100ms,100/1m")?);
/// assert_eq!((items[0].name.as_str(), items[0].quota, items[0].window), ("10/100ms", 100, 1));
/// assert_eq!((items[1].name.as_str(), items[1].quota, items[1].window), ("100/1m", 100, 60));
///
/// // A bucket of 10 refilled 1 per 3 s takes 30 s to refill.
/// let bucket = PolicyItem::of(&Policy::token_bucket(10, "1/3s")?);
/// assert_eq!((bucket[0].quota, bucket[0].window), (10, 30));
/// assert_eq!(bucket[0].name, "token_bucket 10 per 1/3s");
///
/// // GCRA 1/1s with burst 4: 5 emissions take 5 s.
/// let gcra = PolicyItem::of(&Policy::gcra("1/1s", 4)?);
/// assert_eq!((gcra[0].quota, gcra[0].window), (5, 5));
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyItem {
    /// The item's name: the strategy (`10/1s`), or the bucket or GCRA parameters.
    pub name: String,
    /// `q`: permits per window.
    pub quota: u64,
    /// `w`: the window, in whole seconds (at least 1).
    pub window: u64,
}

impl PolicyItem {
    /// One item per rule of `policy`, in declared order.
    pub fn of(policy: &Policy) -> Vec<PolicyItem> {
        match &policy.params {
            Params::FixedWindow { strategies }
            | Params::SlidingLog { strategies }
            | Params::SlidingWindow { strategies, .. } => {
                strategies.iter().map(|s| PolicyItem::new(s.to_string(), s.limit, u128::from(s.window_us), 1)).collect()
            }
            Params::TokenBucket { capacity, rate } | Params::LeakyBucket { capacity, rate } => {
                let (count, period_us) = rate.reduced();
                let name = format!("{} {capacity} per {rate}", policy.algorithm());
                vec![PolicyItem::new(name, *capacity, u128::from(*capacity) * u128::from(period_us), u128::from(count))]
            }
            Params::Gcra { rate, burst } => {
                let (count, period_us) = rate.reduced();
                let emissions = burst + 1;
                let name = format!("gcra {rate} burst {burst}");
                vec![PolicyItem::new(name, emissions, u128::from(emissions) * u128::from(period_us), u128::from(count))]
            }
        }
    }

    /// An item for `quota` permits per a window of `num / den` microseconds.
    fn new(name: String, quota: u64, num: u128, den: u128) -> PolicyItem {
        let (quota, window) = whole_seconds(quota, num, den);
        PolicyItem { name, quota, window }
    }
}

/// Restates `quota` per `num / den` µs with a window of whole seconds (see [`PolicyItem`]).
fn whole_seconds(quota: u64, num: u128, den: u128) -> (u64, u64) {
    let second = den * SECOND_US;
    if num % second == 0 {
        let window = (num / second).max(1);
        (quota, u64::try_from(window).unwrap_or(u64::MAX))
    } else if second % num == 0 {
        let scaled = u128::from(quota) * (second / num);
        (u64::try_from(scaled).unwrap_or(u64::MAX), 1)
    } else {
        (quota, u64::try_from(num.div_ceil(second)).unwrap_or(u64::MAX))
    }
}

/// One rule's live state in a decision: which [`PolicyItem`], what remains, when it resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemState {
    pub index: usize,
    pub remaining: u64,
    pub reset_after: Duration,
}

/// The state of each rule in `decision`, in declared order: one per
/// [`Quota`](crate::Quota) when the decision lists them (window policies
/// with several strategies), else the one rule `limit`/`remaining`/`reset_after` describe.
pub(crate) fn item_states(policy: &Policy, decision: &Decision) -> Vec<ItemState> {
    if !decision.quotas.is_empty() {
        let strategies = policy.strategies();
        return decision
            .quotas
            .iter()
            .enumerate()
            .map(|(i, q)| ItemState {
                index: strategies.iter().position(|s| *s == q.strategy).unwrap_or(i),
                remaining: q.remaining,
                reset_after: q.reset_after,
            })
            .collect();
    }
    // A decision that lists no quotas for several strategies (one settled
    // by `on_error = local` before any store decided, say) describes the
    // rule with the least room: the first whose limit is `decision.limit`.
    let index = policy.strategies().iter().position(|s| s.limit == decision.limit).unwrap_or(0);
    vec![ItemState { index, remaining: decision.remaining, reset_after: decision.reset_after }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(strategies: &str) -> Vec<(u64, u64)> {
        PolicyItem::of(&Policy::sliding_log(strategies).unwrap()).iter().map(|i| (i.quota, i.window)).collect()
    }

    #[test]
    fn windows_in_whole_seconds_are_kept() {
        assert_eq!(window("10/1s,100/1m,1000/1h,5/1d"), [(10, 1), (100, 60), (1000, 3600), (5, 86_400)]);
        assert_eq!(window("7/2500ms"), [(7, 3)]);
    }

    #[test]
    fn windows_dividing_a_second_scale_to_one_second_at_the_same_rate() {
        assert_eq!(window("10/100ms,1/1ms,3/250ms,2/500ms"), [(100, 1), (1000, 1), (12, 1), (4, 1)]);
    }

    #[test]
    fn other_windows_round_up_and_keep_the_quota() {
        assert_eq!(window("10/300ms,10/1500ms,1/1001ms"), [(10, 1), (10, 2), (1, 2)]);
    }

    #[test]
    fn buckets_advertise_the_time_to_refill_their_capacity() {
        let item = |p: Policy| {
            let i = PolicyItem::of(&p).remove(0);
            (i.name, i.quota, i.window)
        };
        assert_eq!(item(Policy::token_bucket(10, "1/3s").unwrap()), ("token_bucket 10 per 1/3s".into(), 10, 30));
        assert_eq!(item(Policy::leaky_bucket(5, "2/1s").unwrap()), ("leaky_bucket 5 per 2/1s".into(), 5, 3));
        // 10 tokens at 100/s refill in 100 ms: scaled to 100 per second.
        assert_eq!(item(Policy::token_bucket(10, "100/1s").unwrap()), ("token_bucket 10 per 100/1s".into(), 100, 1));
        assert_eq!(item(Policy::gcra("1/1s", 4).unwrap()), ("gcra 1/1s burst 4".into(), 5, 5));
        assert_eq!(item(Policy::gcra("10/1s", 0).unwrap()), ("gcra 10/1s burst 0".into(), 10, 1));
        assert_eq!(item(Policy::gcra("3/1m", 1).unwrap()), ("gcra 3/1m burst 1".into(), 2, 40));
    }
}
