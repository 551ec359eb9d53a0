//! What a [`Policy`] advertises, and what a decision says is left: one
//! `(name, q, w, qu)` per rule for `RateLimit-Policy`, one `(r, t)` per rule
//! for `RateLimit`, all in whole seconds as the fields require.
//!
//! The promise behind every number: a client that trusts them is never
//! denied. `q` is what may be sent at once and again in every `w` seconds;
//! `r` is what may be sent now, and within `t` seconds no more than that
//! (so after `t`, at least one more permit is back, had nothing been spent).
//! A concurrency rule is no rate: `q` and `r` count requests in flight, and
//! there is no `w` or `t`, since a permit comes back when a request ends.

use crate::decision::Decision;
use crate::policy::{Params, Policy, Rate, Refill};
use std::time::Duration;

const SECOND_US: u128 = 1_000_000;

/// One rule of a policy as the `RateLimit-Policy` field states it.
///
/// Window algorithms give one item per strategy (`10/1s` is `q=10;w=1`; a
/// calendar strategy's `w` is the longest its window can be).
/// Buckets and GCRA have no window, so one is derived from their parameters:
///
/// | algorithm | `q` | window |
/// |---|---|---|
/// | `token_bucket`, `leaky_bucket` | `capacity` | the time the rate takes to refill (drain) the whole capacity |
/// | `gcra` | `burst + 1` | the time `burst + 1` emissions take at the rate |
/// | `concurrency` | `limit` | none: `q` counts requests in flight ([`QuotaUnit::ConcurrentRequests`]) |
///
/// `q` is always what a client may send at once. `w` is whole seconds, so
/// a window that is not is rounded up and `q` kept: `10/1500ms` is
/// `q=10;w=2`, `10/100ms` is `q=10;w=1`, and a bucket of 10 refilled at
/// 100/s is `q=10;w=1`. A client that sends no more than `q` in any `w`
/// seconds is never denied by that rule (it may be able to send more).
///
/// The name is the policy's configured [`name`](Policy::name) when it has
/// one (`search`; `search:10/1s` per strategy when it has several), else
/// the strategy (`10/1s`) or the bucket or GCRA parameters.
///
/// ```
/// use redlimit::http::{PolicyItem, QuotaUnit};
/// use redlimit::Policy;
///
/// let items = PolicyItem::of(&Policy::fixed_window("10/100ms,100/1m")?);
/// assert_eq!((items[0].name.as_str(), items[0].quota, items[0].window), ("10/100ms", 10, Some(1)));
/// assert_eq!((items[1].name.as_str(), items[1].quota, items[1].window), ("100/1m", 100, Some(60)));
///
/// // A calendar day is stated as the longest a day can be, clock changes included.
/// let daily = PolicyItem::of(&Policy::fixed_window("1000/1d@Europe/Paris")?);
/// assert_eq!((daily[0].name.as_str(), daily[0].window), ("1000/1d@Europe/Paris", Some(26 * 3600)));
///
/// // A bucket of 10 refilled 1 per 3 s takes 30 s to refill.
/// let bucket = PolicyItem::of(&Policy::token_bucket(10, "1/3s")?);
/// assert_eq!((bucket[0].quota, bucket[0].window), (10, Some(30)));
/// assert_eq!(bucket[0].name, "token_bucket 10 per 1/3s");
///
/// // GCRA 1/1s with burst 4: 5 emissions take 5 s.
/// let gcra = PolicyItem::of(&Policy::gcra("1/1s", 4)?);
/// assert_eq!((gcra[0].quota, gcra[0].window), (5, Some(5)));
///
/// // At most 8 requests in flight: no window.
/// let concurrency = PolicyItem::of(&Policy::concurrency(8, "30s")?);
/// assert_eq!((concurrency[0].quota, concurrency[0].window), (8, None));
/// assert_eq!(concurrency[0].unit, QuotaUnit::ConcurrentRequests);
/// assert_eq!(bucket[0].unit, QuotaUnit::Requests);
/// # Ok::<(), redlimit::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyItem {
    /// The item's name: the configured policy name, the strategy (`10/1s`),
    /// or the bucket or GCRA parameters.
    pub name: String,
    /// `q`: permits a client may send at once, and again in every window
    /// (or, for a concurrency policy, hold at once).
    pub quota: u64,
    /// `w`: the window, in whole seconds (at least 1); `None` for a
    /// concurrency policy, whose permits come back when requests end.
    pub window: Option<u64>,
    /// `qu`: what a permit is. [`QuotaUnit::ConcurrentRequests`] for a
    /// concurrency policy, else [`QuotaUnit::Requests`], which a caller
    /// stating another unit ([`insert_rate_limit_headers_in`](crate::http::insert_rate_limit_headers_in)) replaces.
    pub unit: QuotaUnit,
}

impl PolicyItem {
    /// One item per rule of `policy`, in declared order.
    pub fn of(policy: &Policy) -> Vec<PolicyItem> {
        match &policy.params {
            Params::FixedWindow { strategies }
            | Params::SlidingLog { strategies }
            | Params::SlidingWindow { strategies, .. } => {
                let named = |text: String| match policy.name() {
                    Some(name) if strategies.len() > 1 => format!("{name}:{text}"),
                    Some(name) => name.to_string(),
                    None => text,
                };
                strategies
                    .iter()
                    .map(|s| PolicyItem::new(named(s.to_string()), s.limit, u128::from(s.window_us), 1))
                    .collect()
            }
            Params::TokenBucket { capacity, rate, .. } | Params::LeakyBucket { capacity, rate } => {
                let (count, period_us) = policy.reduced_rate;
                let name = policy
                    .name()
                    .map_or_else(|| format!("{} {capacity} per {rate}", policy.algorithm()), str::to_string);
                vec![PolicyItem::new(name, *capacity, u128::from(*capacity) * u128::from(period_us), u128::from(count))]
            }
            Params::Gcra { rate, burst } => {
                let (count, period_us) = policy.reduced_rate;
                let emissions = burst.saturating_add(1);
                let name = policy.name().map_or_else(|| format!("gcra {rate} burst {burst}"), str::to_string);
                vec![PolicyItem::new(name, emissions, u128::from(emissions) * u128::from(period_us), u128::from(count))]
            }
            Params::Concurrency { limit, .. } => {
                let name = policy.name().map_or_else(|| format!("concurrency {limit}"), str::to_string);
                vec![PolicyItem { name, quota: *limit, window: None, unit: QuotaUnit::ConcurrentRequests }]
            }
        }
    }

    /// An item for `quota` permits per a window of `num / den` microseconds,
    /// the window rounded up to whole seconds (at least one).
    fn new(name: String, quota: u64, num: u128, den: u128) -> PolicyItem {
        let window = num.div_ceil(den.saturating_mul(SECOND_US)).max(1);
        let window = Some(u64::try_from(window).unwrap_or(u64::MAX));
        PolicyItem { name, quota, window, unit: QuotaUnit::Requests }
    }
}

/// What one permit stands for: the `qu` parameter of `RateLimit-Policy`
/// (the draft's registered quota units).
///
/// ```
/// use redlimit::http::QuotaUnit;
///
/// assert_eq!(QuotaUnit::default(), QuotaUnit::Requests);
/// assert_eq!(QuotaUnit::Requests.as_str(), None, "the default unit is not stated");
/// assert_eq!(QuotaUnit::ContentBytes.as_str(), Some("content-bytes"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum QuotaUnit {
    /// One permit per request, the draft's default: no `qu` is sent.
    #[default]
    Requests,
    /// A call's cost is its content bytes: `qu="content-bytes"`.
    ContentBytes,
    /// Permits are requests in flight: `qu="concurrent-requests"`.
    ConcurrentRequests,
}

impl QuotaUnit {
    /// The `qu` value, `None` for requests.
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            QuotaUnit::Requests => None,
            QuotaUnit::ContentBytes => Some("content-bytes"),
            QuotaUnit::ConcurrentRequests => Some("concurrent-requests"),
        }
    }
}

/// One rule's live state in a decision: which [`PolicyItem`], what remains,
/// and for how long no more than that is available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemState {
    pub index: usize,
    pub remaining: u64,
    /// `t` before rounding up to whole seconds; `None` when no time can be
    /// named (a concurrency permit comes back when a request ends).
    pub effective: Option<Duration>,
}

/// The state of each rule in `decision`, in declared order: one per
/// [`Quota`](crate::Quota) when the decision lists them (window policies
/// with several strategies), else the one rule `limit`/`remaining` describe.
///
/// `effective` is the time until more than `remaining` is available:
/// - a bucket or GCRA: until the next whole permit is back (`reset_after`
///   is until all are back, one permit every `p / n` µs);
/// - a window rule that denied the call: its own retry time;
/// - any other window rule: until its counted calls have all left. Exact
///   for a fixed window; for a sliding log or window an upper bound, since
///   the decision does not say when the oldest call leaves;
/// - concurrency: none. Its `reset_after` (until the last lease ends) is no
///   such time: a permit frees whenever its request ends, and a lease held
///   is renewed past it.
///
/// So on a denial no rule's `t` is later than `Retry-After`, the latest
/// retry time of the rules that denied it.
///
/// With `per_request` permits to a request, `remaining` counts whole
/// requests and a bucket's `effective` waits for a whole request.
pub(crate) fn item_states(policy: &Policy, decision: &Decision, per_request: u64) -> Vec<ItemState> {
    let per_request = per_request.max(1);
    if !decision.quotas.is_empty() {
        let strategies = policy.strategies();
        return decision
            .quotas
            .iter()
            .enumerate()
            .map(|(i, q)| ItemState {
                index: strategies.iter().position(|s| *s == q.strategy).unwrap_or(i),
                remaining: q.remaining / per_request,
                effective: Some(q.retry_after.unwrap_or(q.reset_after)),
            })
            .collect();
    }
    let effective = match &policy.params {
        Params::TokenBucket { refill: Refill::Interval, rate, .. } => Some(next_refill(*rate, decision, per_request)),
        Params::TokenBucket { .. } | Params::LeakyBucket { .. } | Params::Gcra { .. } => {
            Some(next_request(policy.reduced_rate, decision, per_request))
        }
        Params::Concurrency { .. } => None,
        _ if !decision.allowed => Some(decision.retry_after.unwrap_or(decision.reset_after)),
        _ => Some(decision.reset_after),
    };
    // A decision that lists no quotas for several strategies (one settled
    // by `on_error = local` before any store decided, say) describes the
    // rule with the least room: the first whose limit is `decision.limit`.
    let index = policy.strategies().iter().position(|s| s.limit == decision.limit).unwrap_or(0);
    vec![ItemState { index, remaining: decision.remaining / per_request, effective }]
}

/// For a bucket or GCRA (`n` units per µs, `p` units a permit): the time
/// until one more request of `step` permits than `remaining` allows is held.
///
/// `reset_after` is until all `limit` are back, so that request's permits
/// are complete as many permit times earlier as are still missing after
/// them; when the bucket cannot hold one more request, the bound is a full
/// bucket plus one request's refill. Never later than a denial's
/// `retry_after`, which is exact.
fn next_request((n, p): (u64, u64), decision: &Decision, step: u64) -> Duration {
    let (n, p) = (u128::from(n.max(1)), u128::from(p));
    let reset_us = decision.reset_after.as_micros();
    let held_after = u128::from(decision.remaining / step + 1) * u128::from(step);
    let next_us = match u128::from(decision.limit).checked_sub(held_after) {
        // `reset_us` is rounded up, so this is at most 1 µs late.
        Some(missing) => reset_us.saturating_sub(missing * p / n),
        None => reset_us + (u128::from(step) * p).div_ceil(n),
    };
    let next = Duration::from_micros(u64::try_from(next_us).unwrap_or(u64::MAX));
    match decision.retry_after {
        Some(retry) if !decision.allowed => next.min(retry),
        _ => next,
    }
}

/// For a token bucket refilled by interval (`rate.count` tokens at each
/// period's end): the time until one more request of `step` permits than
/// `remaining` allows is held, which is always a period's end. `reset_after`
/// is the end of the period that fills the bucket, so the next end is as
/// many periods before it as the refills still missing after it.
fn next_refill(rate: Rate, decision: &Decision, step: u64) -> Duration {
    let (count, period) = (u128::from(rate.count.max(1)), u128::from(rate.period_us));
    let reset_us = decision.reset_after.as_micros();
    let remaining = u128::from(decision.remaining);
    let periods_to_full = (u128::from(decision.limit) - remaining.min(u128::from(decision.limit))).div_ceil(count);
    let held_after = (remaining / u128::from(step) + 1) * u128::from(step);
    let next_us = match periods_to_full {
        // Full: the bucket cannot hold one more; bound it by the refills of a request after it.
        0 => period * u128::from(step).div_ceil(count),
        _ if held_after > u128::from(decision.limit) => reset_us + period * u128::from(step).div_ceil(count),
        full => {
            let next_end = reset_us.saturating_sub((full - 1) * period);
            next_end + ((held_after - remaining).div_ceil(count) - 1) * period
        }
    };
    let next = Duration::from_micros(u64::try_from(next_us).unwrap_or(u64::MAX));
    match decision.retry_after {
        Some(retry) if !decision.allowed => next.min(retry),
        _ => next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(strategies: &str) -> Vec<(u64, u64)> {
        PolicyItem::of(&Policy::sliding_log(strategies).unwrap()).iter().map(|i| (i.quota, i.window.unwrap())).collect()
    }

    #[test]
    fn windows_in_whole_seconds_are_kept() {
        assert_eq!(window("10/1s,100/1m,1000/1h,5/1d"), [(10, 1), (100, 60), (1000, 3600), (5, 86_400)]);
        assert_eq!(window("7/2500ms"), [(7, 3)]);
    }

    #[test]
    fn other_windows_round_up_and_keep_the_quota() {
        assert_eq!(window("10/100ms,1/1ms,3/250ms,2/500ms"), [(10, 1), (1, 1), (3, 1), (2, 1)]);
        assert_eq!(window("10/300ms,10/1500ms,1/1001ms"), [(10, 1), (10, 2), (1, 2)]);
    }

    #[test]
    fn buckets_advertise_their_capacity_per_the_time_to_refill_it() {
        let item = |p: Policy| {
            let i = PolicyItem::of(&p).remove(0);
            (i.name, i.quota, i.window.unwrap())
        };
        assert_eq!(item(Policy::token_bucket(10, "1/3s").unwrap()), ("token_bucket 10 per 1/3s".into(), 10, 30));
        assert_eq!(item(Policy::leaky_bucket(5, "2/1s").unwrap()), ("leaky_bucket 5 per 2/1s".into(), 5, 3));
        // 10 tokens at 100/s refill in 100 ms: only 10 can be sent at once.
        assert_eq!(item(Policy::token_bucket(10, "100/1s").unwrap()), ("token_bucket 10 per 100/1s".into(), 10, 1));
        assert_eq!(item(Policy::gcra("1/1s", 4).unwrap()), ("gcra 1/1s burst 4".into(), 5, 5));
        assert_eq!(item(Policy::gcra("10/1s", 0).unwrap()), ("gcra 10/1s burst 0".into(), 1, 1));
        assert_eq!(item(Policy::gcra("3/1m", 1).unwrap()), ("gcra 3/1m burst 1".into(), 2, 40));
    }

    #[test]
    fn configured_policies_name_their_items() {
        let names = |p: Policy| PolicyItem::of(&p.with_name("search")).into_iter().map(|i| i.name).collect::<Vec<_>>();
        assert_eq!(names(Policy::fixed_window("10/1s").unwrap()), ["search"]);
        assert_eq!(names(Policy::sliding_log("10/1s,100/1m").unwrap()), ["search:10/1s", "search:100/1m"]);
        assert_eq!(names(Policy::gcra("1/1s", 0).unwrap()), ["search"]);
        assert_eq!(names(Policy::concurrency(2, "30s").unwrap()), ["search"]);
    }

    #[tokio::test]
    async fn a_concurrency_rule_has_no_window_and_no_reset() {
        use crate::limiter::Limiter;
        use crate::store::Store;
        let policy = Policy::concurrency(2, "30s").unwrap();
        let item = PolicyItem::of(&policy).remove(0);
        assert_eq!(
            item,
            PolicyItem { name: "concurrency 2".into(), quota: 2, window: None, unit: QuotaUnit::ConcurrentRequests }
        );
        let limiter = Limiter::new("c", policy.clone(), &Store::memory());
        let held = limiter.acquire("k").await.unwrap();
        let states = item_states(&policy, held.decision(), 1);
        assert_eq!(states, [ItemState { index: 0, remaining: 1, effective: None }]);
    }
}
