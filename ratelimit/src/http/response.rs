//! A denial as an HTTP response: 429 (or 503 when the store could not
//! decide), its header fields, and an `application/problem+json` body.

use super::fields::headers::{insert_rate_limit_headers_per_request, retry_after_secs, Counted, HeaderStyle};
use super::fields::quota::PolicyItem;
use crate::decision::Decision;
use crate::policy::Policy;
use crate::rate_limited::{DenialReason, RateLimited};
use axum::http::header::{HeaderMap, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use redlimit_grammar::quote;
use redlimit_grammar::AlgorithmKind;
use std::fmt::Write;

/// The media type of the body (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A denied call becomes `429 Too Many Requests` with `Retry-After`,
/// `RateLimit-Policy`, `RateLimit` and a problem+json body; see
/// [`denial_response`] for every case and the legacy headers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use axum::response::IntoResponse;
/// use redlimit::{Limiter, ManualClock, Policy, Store};
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("search", Policy::sliding_log("1/1m")?, &store);
/// limiter.limit("carol", 1).await.unwrap();
/// let response = limiter.limit("carol", 1).await.unwrap_err().into_response();
///
/// assert_eq!(response.status(), 429);
/// assert_eq!(response.headers()["retry-after"], "60");
/// assert_eq!(response.headers()["ratelimit-policy"], r#""1/1m";q=1;w=60"#);
/// assert_eq!(response.headers()["ratelimit"], r#""1/1m";r=0;t=60"#);
/// assert_eq!(response.headers()["content-type"], "application/problem+json");
/// # Ok(()) }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
impl IntoResponse for RateLimited {
    fn into_response(self) -> Response {
        denial_response(&self, HeaderStyle::Draft)
    }
}

/// The response for a denial, with the header fields of `style`.
///
/// - A denial by the limit: `429`, `Retry-After` in whole seconds rounded
///   up (absent when the cost can never pass, and for a concurrency policy,
///   whose permits free when requests end), `RateLimit-Policy` and
///   `RateLimit` (see [`rate_limit_headers`](super::rate_limit_headers)).
///   The body is the draft's `quota-exceeded` problem type
///   ([`QUOTA_EXCEEDED`]): `title` `Quota Exceeded`, `status`, `detail`,
///   `retry_after` (the same whole seconds as `Retry-After`, when there is
///   one) and `violated-policies`, the names of the `RateLimit-Policy`
///   items that denied the call.
/// - A denial because the store could not answer or the named policy is
///   not configured (`on_error = "deny"`, any [`RateLimited::reason`] but
///   [`DenialReason::Limited`]): `503 Service Unavailable` with an
///   `about:blank` body saying the limiter could not decide and why, no
///   `RateLimit` fields (no store state was read) and `Retry-After` only if
///   the decision names a wait (in practice none: when the store returns
///   cannot be known).
/// - A call made wrongly ([`DenialReason::Misused`], which the error's
///   `Display` and a WARN, once per limiter, explain): `500 Internal Server Error`, the same body
///   saying the limiter could not decide, without the explanation.
///
/// The `detail` never contains the key, nor the module path `#[rate_limit]`
/// names a limiter by when it has no `name = "..."`: the limiter's name
/// appears only when it was given.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::http::{denial_response, HeaderStyle};
/// use redlimit::{Limiter, ManualClock, Policy, Store};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let store = Store::memory().with_clock(clock.clone());
/// let limiter = Limiter::new("login", Policy::sliding_log("1/10s")?, &store);
/// limiter.limit("203.0.113.9", 1).await.unwrap();
/// clock.advance(Duration::from_millis(75));
/// let denied = limiter.limit("203.0.113.9", 1).await.unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(9_925)));
///
/// let response = denial_response(&denied, HeaderStyle::DraftAndLegacy);
/// assert_eq!(response.headers()["retry-after"], "10");
/// assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
/// let body = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
/// assert_eq!(
///     std::str::from_utf8(&body).unwrap(),
///     concat!(
///         r#"{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","#,
///         r#""status":429,"detail":"rate limited by `login` (1/10s exceeded); retry after 10s","retry_after":10,"#,
///         r#""violated-policies":["1/10s"]}"#
///     )
/// );
/// # Ok(()) }
/// ```
pub fn denial_response(denied: &RateLimited, style: HeaderStyle) -> Response {
    respond(denied, denied.policy(), style, Counted::Requests(1), 1)
}

/// Marks a response as a limit's denial (a [`RateLimited`]'s, a layer's
/// rejection): a [`RateLimitLayer`](super::RateLimitLayer) outside it gives
/// back what its request took, since the route it paid for never ran.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeniedByLimit;

/// The problem type of a 429 (draft-ietf-httpapi-ratelimit-headers, "Quota
/// Exceeded"): the request went over one or more quota policies, listed in
/// the `violated-policies` member.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// [`denial_response`] when the caller already holds the policy: the
/// fields count as `counted` says, and `cost` is what the denied request
/// asked for. Marked [`DeniedByLimit`].
pub(crate) fn respond(
    denied: &RateLimited,
    policy: Option<&Policy>,
    style: HeaderStyle,
    counted: Counted,
    cost: u64,
) -> Response {
    let mut response = respond_unmarked(denied, policy, style, counted, cost);
    response.extensions_mut().insert(DeniedByLimit);
    response
}

fn respond_unmarked(
    denied: &RateLimited,
    policy: Option<&Policy>,
    style: HeaderStyle,
    counted: Counted,
    cost: u64,
) -> Response {
    match policy {
        Some(policy) if denied.reason() == DenialReason::Limited => {
            let mut headers = HeaderMap::new();
            insert_rate_limit_headers_per_request(&mut headers, policy, denied.decision(), style, counted);
            // The body repeats the wait `Retry-After` states, read back so the two never differ.
            let retry_after = headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()?.parse().ok());
            let status = StatusCode::TOO_MANY_REQUESTS;
            let detail = detail(denied, retry_after, cost);
            let mut body = Problem::new(QUOTA_EXCEEDED, "Quota Exceeded", status, &detail);
            body.retry_after(retry_after);
            body.strings("violated-policies", &violated_policies(policy, denied.decision()));
            let mut response = body.into_response(status);
            response.headers_mut().extend(headers);
            response
        }
        _ => {
            let retry_after = denied.retry_after().map(retry_after_secs);
            // A call made wrongly is the server's mistake, not the store's absence.
            let status = match denied.reason() {
                DenialReason::Misused => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            let mut response = problem(status, &detail(denied, retry_after, cost), retry_after);
            if let Some(secs) = retry_after {
                response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
            }
            response
        }
    }
}

/// What the client is told: which rule denied and the wait in the whole
/// seconds `Retry-After` says, or that the limiter could not decide.
/// `cost` is the permits one request takes.
fn detail(denied: &RateLimited, retry_after: Option<u64>, cost: u64) -> String {
    // A name `#[rate_limit]` made up from the module path is not the client's to see.
    let name = (!denied.0.named_by_default).then(|| quote(denied.limiter()));
    let mut out = String::new();
    match (denied.reason(), denied.policy()) {
        (DenialReason::Limited, Some(policy)) => {
            match &name {
                Some(name) => write!(out, "rate limited by `{name}` ("),
                None => write!(out, "rate limited ("),
            }
            .ok();
            let violated = &denied.decision().violated;
            if violated.is_empty() {
                write!(out, "{policy})").ok();
            } else {
                let list: Vec<String> = violated.iter().map(ToString::to_string).collect();
                write!(out, "{} exceeded)", list.join(", ")).ok();
            }
            // A concurrency permit frees when a request in flight ends: no wait can be named.
            let in_flight = policy.algorithm() == AlgorithmKind::Concurrency && cost <= denied.decision().limit;
            match retry_after {
                Some(secs) => write!(out, "; retry after {secs}s"),
                None if in_flight => write!(out, "; retry once a request in flight is done"),
                None => write!(out, "; this cost can never pass: it exceeds what the policy admits"),
            }
            .ok();
        }
        (DenialReason::StoreUnavailable, _) => {
            match &name {
                Some(name) => write!(out, "the store of rate limiter `{name}` is unavailable"),
                None => write!(out, "the rate limiter's store is unavailable"),
            }
            .ok();
            out.push_str(", so the request could not be decided");
        }
        (DenialReason::Misused, _) => {
            match &name {
                Some(name) => write!(out, "rate limiter `{name}` was called in a way it cannot decide"),
                None => write!(out, "the rate limiter was called in a way it cannot decide"),
            }
            .ok();
            out.push_str(", so the request could not be decided");
        }
        _ => {
            match &name {
                Some(name) => write!(out, "the named policy of rate limiter `{name}` is not configured"),
                None => write!(out, "the rate limiter's named policy is not configured"),
            }
            .ok();
            out.push_str(", so the request could not be decided");
        }
    }
    out
}

/// The names of the `RateLimit-Policy` items that denied `decision`: the
/// violated strategies of a window policy, else the policy's one item.
fn violated_policies(policy: &Policy, decision: &Decision) -> Vec<String> {
    let items = PolicyItem::of(policy);
    let strategies = policy.strategies();
    let violated: Vec<String> = decision
        .violated
        .iter()
        .filter_map(|s| strategies.iter().position(|t| t == s))
        .filter_map(|i| items.get(i).map(|item| item.name.clone()))
        .collect();
    match violated.is_empty() {
        true => items.into_iter().map(|item| item.name).collect(),
        false => violated,
    }
}

/// An `about:blank` problem+json response (RFC 9457) of `status` saying
/// `detail`; an empty `detail` is left out (a `500` for a server set up
/// wrong tells the client nothing the operator's log says).
pub(crate) fn problem(status: StatusCode, detail: &str, retry_after: Option<u64>) -> Response {
    let mut body = Problem::new("about:blank", status.canonical_reason().unwrap_or("Error"), status, detail);
    body.retry_after(retry_after);
    body.into_response(status)
}

/// A problem+json body, written member by member.
struct Problem(String);

impl Problem {
    fn new(kind: &str, title: &str, status: StatusCode, detail: &str) -> Problem {
        let mut body = String::from(r#"{"type":"#);
        json_string(&mut body, kind);
        body.push_str(r#","title":"#);
        json_string(&mut body, title);
        let _ = write!(body, r#","status":{}"#, status.as_u16());
        if !detail.is_empty() {
            body.push_str(r#","detail":"#);
            json_string(&mut body, detail);
        }
        Problem(body)
    }

    fn retry_after(&mut self, secs: Option<u64>) {
        if let Some(secs) = secs {
            let _ = write!(self.0, r#","retry_after":{secs}"#);
        }
    }

    fn strings(&mut self, member: &str, values: &[String]) {
        self.0.push(',');
        json_string(&mut self.0, member);
        self.0.push_str(":[");
        for (i, value) in values.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            json_string(&mut self.0, value);
        }
        self.0.push(']');
    }

    fn into_response(mut self, status: StatusCode) -> Response {
        self.0.push('}');
        let mut response = (status, self.0).into_response();
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

/// Appends `text` as a JSON string literal.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c < ' ' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::json_string;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        let table = [
            ("plain", r#""plain""#),
            ("`a\"b`", r#""`a\"b`""#),
            ("c:\\d", r#""c:\\d""#),
            ("line\nbreak\t\u{1}", r#""line\nbreak\t\u0001""#),
            ("é ✓", "\"é ✓\""),
        ];
        for (input, expected) in table {
            let mut out = String::new();
            json_string(&mut out, input);
            assert_eq!(out, expected, "{input:?}");
        }
    }
}
