//! The header fields of a decision: `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers), `Retry-After`, and the legacy
//! `X-RateLimit-*` set.

use super::field_text::{ceil_secs, policy_field, state_field, value};
use super::quota::{item_states, PolicyItem, QuotaUnit};
use crate::decision::Decision;
use crate::policy::Policy;
use axum::http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use redlimit_grammar::AlgorithmKind;
use std::time::Duration;

/// `RateLimit-Policy`: the quota policies, one item per rule.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`: what is left of each quota policy, and when it resets.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// Legacy `X-RateLimit-Limit`: the limit of the rule with the least room.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// Legacy `X-RateLimit-Remaining`: what that rule has left.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// Legacy `X-RateLimit-Reset`: seconds (not a timestamp) until the key is untouched again.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Which header fields to send.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::http::{rate_limit_headers, HeaderStyle};
/// use redlimit::{Limiter, Policy, Store};
///
/// let limiter = Limiter::new("api", Policy::token_bucket(5, "1/1s")?, &Store::memory());
/// let decision = limiter.check("k", 1).await?;
/// let draft = rate_limit_headers(limiter.policy(), &decision, HeaderStyle::Draft);
/// assert_eq!(draft.len(), 2, "RateLimit-Policy and RateLimit");
/// let legacy = rate_limit_headers(limiter.policy(), &decision, HeaderStyle::DraftAndLegacy);
/// assert_eq!(legacy["x-ratelimit-remaining"], "4");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeaderStyle {
    /// `RateLimit-Policy` and `RateLimit` (and `Retry-After` on a denial).
    #[default]
    Draft,
    /// The draft's fields plus `X-RateLimit-Limit`, `-Remaining` and `-Reset`.
    DraftAndLegacy,
}

/// The header fields describing `decision` of `policy`.
///
/// - `RateLimit-Policy`: one item per rule, `"<name>";q=<quota>;w=<seconds>`
///   (see [`PolicyItem`] for names, buckets, GCRA and windows that are not
///   whole seconds): `q` may be sent at once and again every `w` seconds.
/// - `RateLimit`: `"<name>";r=<remaining>;t=<seconds>`: `r` may be sent
///   now, and no more within `t` (rounded up): a bucket's or GCRA's next
///   permit, a fixed window's end, a sliding log's or window's full clear
///   (its calls may leave earlier), and, for a rule that denied the call,
///   its own retry time.
/// - `Retry-After` on a denial that names a wait: whole seconds, rounded
///   up (obeying it succeeds), never 0, and never earlier than the `t` of
///   a rule that denied the call.
/// - with [`HeaderStyle::DraftAndLegacy`], `X-RateLimit-Limit`, `-Remaining`
///   and `-Reset` (seconds until the key is untouched) of the rule with the
///   least room.
/// - a [`Policy::concurrency`] states requests in flight, not a rate:
///   `"<name>";q=<limit>;qu="concurrent-requests"` with no `w`, and
///   `"<name>";r=<remaining>` with no `t`, since a permit comes back when a
///   request ends, at no time that can be named; a denial has no
///   `Retry-After` and the legacy set no `X-RateLimit-Reset`.
///
/// Permits are counted as requests (no `qu`) but for concurrency; see
/// [`insert_rate_limit_headers_in`] for another unit.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::http::{rate_limit_headers, HeaderStyle};
/// use redlimit::{Limiter, ManualClock, Policy, Store};
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("api", Policy::fixed_window("2/1m")?, &store);
/// let decision = limiter.check("alice", 1).await?;
///
/// let headers = rate_limit_headers(limiter.policy(), &decision, HeaderStyle::DraftAndLegacy);
/// assert_eq!(headers["ratelimit-policy"], r#""2/1m";q=2;w=60"#);
/// assert_eq!(headers["ratelimit"], r#""2/1m";r=1;t=60"#);
/// assert_eq!(headers["x-ratelimit-remaining"], "1");
/// assert!(headers.get("retry-after").is_none());
///
/// limiter.check("alice", 1).await?;
/// let denied = limiter.check("alice", 1).await?;
/// let headers = rate_limit_headers(limiter.policy(), &denied, HeaderStyle::Draft);
/// assert_eq!(headers["retry-after"], "60");
/// assert_eq!(headers["ratelimit"], r#""2/1m";r=0;t=60"#);
/// assert!(headers.get("x-ratelimit-limit").is_none());
///
/// // A bucket of 3 refilled 1 per 3 s: its next token, not its full refill.
/// let limiter = Limiter::new("tokens", Policy::token_bucket(3, "1/3s")?, &store);
/// limiter.check("carol", 2).await?;
/// let decision = limiter.check("carol", 1).await?;
/// let headers = rate_limit_headers(limiter.policy(), &decision, HeaderStyle::Draft);
/// assert_eq!(headers["ratelimit-policy"], r#""token_bucket 3 per 1/3s";q=3;w=9"#);
/// assert_eq!(headers["ratelimit"], r#""token_bucket 3 per 1/3s";r=0;t=3"#);
///
/// // Several strategies: one item each, in declared order.
/// let limiter = Limiter::new("search", Policy::sliding_log("10/1s,100/1m")?, &store);
/// let decision = limiter.check("bob", 3).await?;
/// let headers = rate_limit_headers(limiter.policy(), &decision, HeaderStyle::Draft);
/// assert_eq!(headers["ratelimit-policy"], r#""10/1s";q=10;w=1, "100/1m";q=100;w=60"#);
/// assert_eq!(headers["ratelimit"], r#""10/1s";r=7;t=1, "100/1m";r=97;t=60"#);
///
/// // At most 2 at once: one held, one left, and no time is named.
/// let limiter = Limiter::new("exports", Policy::concurrency(2, "30s")?, &store);
/// let permit = limiter.acquire("dave").await.unwrap();
/// let headers = rate_limit_headers(limiter.policy(), permit.decision(), HeaderStyle::Draft);
/// assert_eq!(headers["ratelimit-policy"], r#""concurrency 2";q=2;qu="concurrent-requests""#);
/// assert_eq!(headers["ratelimit"], r#""concurrency 2";r=1"#);
/// # Ok(()) }
/// ```
pub fn rate_limit_headers(policy: &Policy, decision: &Decision, style: HeaderStyle) -> HeaderMap {
    let mut headers = HeaderMap::new();
    insert_rate_limit_headers(&mut headers, policy, decision, style);
    headers
}

/// Like [`rate_limit_headers`], into an existing map (replacing fields of the same names).
pub fn insert_rate_limit_headers(headers: &mut HeaderMap, policy: &Policy, decision: &Decision, style: HeaderStyle) {
    insert_rate_limit_headers_in(headers, policy, decision, style, QuotaUnit::Requests);
}

/// Like [`insert_rate_limit_headers`] for permits of another `unit`: every
/// `RateLimit-Policy` item states it as `qu` (unless it is requests, the
/// draft's default), so a client reads `q` and `r` in that unit. An item
/// with a unit of its own (concurrency's `concurrent-requests`) keeps it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use axum::http::HeaderMap;
/// use redlimit::http::{insert_rate_limit_headers_in, HeaderStyle, QuotaUnit};
/// use redlimit::{Limiter, ManualClock, Policy, Store};
///
/// // Uploads limited by their size: the cost of a call is its content bytes.
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("uploads", Policy::fixed_window("1000000/1h")?, &store);
/// let decision = limiter.check("dave", 4096).await?;
/// let mut headers = HeaderMap::new();
/// insert_rate_limit_headers_in(&mut headers, limiter.policy(), &decision, HeaderStyle::Draft, QuotaUnit::ContentBytes);
/// assert_eq!(headers["ratelimit-policy"], r#""1000000/1h";q=1000000;w=3600;qu="content-bytes""#);
/// assert_eq!(headers["ratelimit"], r#""1000000/1h";r=995904;t=3600"#);
/// # Ok(()) }
/// ```
pub fn insert_rate_limit_headers_in(
    headers: &mut HeaderMap,
    policy: &Policy,
    decision: &Decision,
    style: HeaderStyle,
    unit: QuotaUnit,
) {
    write_fields(headers, policy, decision, style, unit, 1);
}

/// Adds `fields` to what `headers` already says: the `RateLimit-Policy` and
/// `RateLimit` lists are joined, so a response limited twice (a layer and an
/// annotated handler) states both policies and a client pacing by them
/// meets neither limit; any other field already there (a denial's
/// `Retry-After`, legacy counts) is kept, and the rest are added.
pub(crate) fn merge_rate_limit_fields(headers: &mut HeaderMap, fields: &HeaderMap) {
    for (name, value) in fields {
        match headers.get(name) {
            None => {
                headers.insert(name.clone(), value.clone());
            }
            Some(existing) if name == RATELIMIT || name == RATELIMIT_POLICY => {
                let joined = [existing.as_bytes(), b", ", value.as_bytes()].concat();
                if let Ok(joined) = HeaderValue::from_bytes(&joined) {
                    headers.insert(name.clone(), joined);
                }
            }
            Some(_) => {}
        }
    }
}

/// What a layer's fields count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Whole requests of this many permits each (a layer's fixed
    /// [`cost`](crate::http::RateLimitLayer::cost)), in the draft's default unit,
    /// so `q`, `r` and the legacy counts are whole requests and a bucket's
    /// `t` waits for a whole request's permits.
    Requests(u64),
    /// Permits, stated in this unit: requests cost what each computes.
    Permits(QuotaUnit),
}

/// The fields for a layer's route, counted as `counted` says.
pub(crate) fn insert_rate_limit_headers_per_request(
    headers: &mut HeaderMap,
    policy: &Policy,
    decision: &Decision,
    style: HeaderStyle,
    counted: Counted,
) {
    match counted {
        Counted::Requests(cost) => write_fields(headers, policy, decision, style, QuotaUnit::Requests, cost.max(1)),
        Counted::Permits(unit) => write_fields(headers, policy, decision, style, unit, 1),
    }
}

fn write_fields(
    headers: &mut HeaderMap,
    policy: &Policy,
    decision: &Decision,
    style: HeaderStyle,
    unit: QuotaUnit,
    per_request: u64,
) {
    let mut items = PolicyItem::of(policy);
    for item in &mut items {
        item.quota /= per_request;
        if item.unit == QuotaUnit::Requests {
            item.unit = unit;
        }
    }
    headers.insert(RATELIMIT_POLICY, value(policy_field(&items)));
    let states = item_states(policy, decision, per_request);
    headers.insert(RATELIMIT, value(state_field(&items, &states)));
    if !decision.allowed {
        if let Some(wait) = decision.retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(wait)));
        }
    }
    if style == HeaderStyle::DraftAndLegacy {
        headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(decision.limit / per_request));
        headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(decision.remaining / per_request));
        // A concurrency key is untouched only once its last request ends: no time to state.
        if policy.algorithm() != AlgorithmKind::Concurrency {
            headers.insert(X_RATELIMIT_RESET, HeaderValue::from(ceil_secs(decision.reset_after)));
        }
    }
}

/// `Retry-After` for a wait: whole seconds rounded up, and at least 1 (a
/// denied client told 0 would come straight back).
///
/// ```
/// use redlimit::http::retry_after_secs;
/// use std::time::Duration;
///
/// assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
/// assert_eq!(retry_after_secs(Duration::from_millis(1000)), 1);
/// assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
/// assert_eq!(retry_after_secs(Duration::ZERO), 1);
/// ```
pub fn retry_after_secs(wait: Duration) -> u64 {
    ceil_secs(wait).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn state_fields_count_each_strategy_down_with_the_clock() {
        use crate::clock::ManualClock;
        use crate::limiter::Limiter;
        use crate::store::Store;
        let clock = ManualClock::new();
        let store = Store::memory().with_clock(clock.clone());
        let limiter = Limiter::new("t", Policy::fixed_window("2/1s,5/1m").unwrap(), &store);
        // (advance before the call in ms, expected RateLimit, expected Retry-After)
        let table = [
            (0, r#""2/1s";r=1;t=1, "5/1m";r=4;t=60"#, None),
            (400, r#""2/1s";r=0;t=1, "5/1m";r=3;t=60"#, None),
            (100, r#""2/1s";r=0;t=1, "5/1m";r=3;t=60"#, Some("1")),
            (500, r#""2/1s";r=1;t=1, "5/1m";r=2;t=59"#, None),
            (1_000, r#""2/1s";r=1;t=1, "5/1m";r=1;t=58"#, None),
        ];
        for (i, (advance, expected, retry_after)) in table.into_iter().enumerate() {
            clock.advance(Duration::from_millis(advance));
            let decision = limiter.check("k", 1).await.unwrap();
            let headers = rate_limit_headers(limiter.policy(), &decision, HeaderStyle::Draft);
            assert_eq!(headers[&RATELIMIT], expected, "call {i}");
            assert_eq!(headers.get(RETRY_AFTER).map(|v| v.to_str().unwrap()), retry_after, "call {i}");
        }
    }

    #[tokio::test]
    async fn a_cost_per_request_is_restated_in_whole_requests() {
        const REQUESTS_OF_3: Counted = Counted::Requests(3);
        use crate::clock::ManualClock;
        use crate::limiter::Limiter;
        use crate::store::Store;
        let store = Store::memory().with_clock(ManualClock::new());
        let field = |h: &HeaderMap, name: &HeaderName| h[name].to_str().unwrap().to_owned();
        let bucket = Limiter::new("t", Policy::token_bucket(10, "1/1s").unwrap(), &store);
        // Three permits a request: 10 tokens are 3 requests, and each
        // request's tokens are back 2 s after the last one was spent.
        let table = [
            (r#""token_bucket 10 per 1/1s";r=2;t=2"#, None),
            (r#""token_bucket 10 per 1/1s";r=1;t=2"#, None),
            (r#""token_bucket 10 per 1/1s";r=0;t=2"#, None),
            (r#""token_bucket 10 per 1/1s";r=0;t=2"#, Some("2")),
        ];
        for (i, (expected, retry_after)) in table.into_iter().enumerate() {
            let decision = bucket.check("k", 3).await.unwrap();
            let mut headers = HeaderMap::new();
            insert_rate_limit_headers_per_request(
                &mut headers,
                bucket.policy(),
                &decision,
                HeaderStyle::Draft,
                REQUESTS_OF_3,
            );
            assert_eq!(field(&headers, &RATELIMIT_POLICY), r#""token_bucket 10 per 1/1s";q=3;w=10"#, "call {i}");
            assert_eq!(field(&headers, &RATELIMIT), expected, "call {i}");
            assert_eq!(headers.get(RETRY_AFTER).map(|v| v.to_str().unwrap()), retry_after, "call {i}");
        }
        let window = Limiter::new("w", Policy::fixed_window("10/1m").unwrap(), &store);
        let mut headers = HeaderMap::new();
        let decision = window.check("k", 3).await.unwrap();
        insert_rate_limit_headers_per_request(
            &mut headers,
            window.policy(),
            &decision,
            HeaderStyle::DraftAndLegacy,
            REQUESTS_OF_3,
        );
        assert_eq!(field(&headers, &RATELIMIT_POLICY), r#""10/1m";q=3;w=60"#);
        assert_eq!(field(&headers, &RATELIMIT), r#""10/1m";r=2;t=60"#);
        assert_eq!(
            (field(&headers, &X_RATELIMIT_LIMIT), field(&headers, &X_RATELIMIT_REMAINING)),
            ("3".into(), "2".into())
        );
    }

    #[test]
    fn waits_round_up_to_whole_seconds_and_never_to_zero() {
        let table = [(0, 1), (1, 1), (999_999, 1), (1_000_000, 1), (1_000_001, 2), (59_000_000, 59), (59_999_999, 60)];
        for (us, secs) in table {
            assert_eq!(retry_after_secs(Duration::from_micros(us)), secs, "{us} µs");
        }
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
    }

    #[test]
    fn merged_fields_join_the_lists_and_keep_what_was_there() {
        let mut headers = HeaderMap::new();
        headers.insert(RATELIMIT_POLICY, HeaderValue::from_static(r#""h";q=1;w=60"#));
        headers.insert(RATELIMIT, HeaderValue::from_static(r#""h";r=0;t=60"#));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("60"));
        let mut fields = HeaderMap::new();
        fields.insert(RATELIMIT_POLICY, HeaderValue::from_static(r#""l";q=5;w=60"#));
        fields.insert(RATELIMIT, HeaderValue::from_static(r#""l";r=4;t=60"#));
        fields.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        fields.insert(X_RATELIMIT_LIMIT, HeaderValue::from_static("5"));
        merge_rate_limit_fields(&mut headers, &fields);
        assert_eq!(headers[RATELIMIT_POLICY], r#""h";q=1;w=60, "l";q=5;w=60"#);
        assert_eq!(headers[RATELIMIT], r#""h";r=0;t=60, "l";r=4;t=60"#);
        assert_eq!(headers[RETRY_AFTER], "60", "the denial's wait stands");
        assert_eq!(headers[X_RATELIMIT_LIMIT], "5");
        let mut empty = HeaderMap::new();
        merge_rate_limit_fields(&mut empty, &fields);
        assert_eq!(empty, fields);
    }
}
