//! A denial as an HTTP response: 429 (or 503 when the store could not
//! decide), its header fields, and an `application/problem+json` body.

use super::headers::{insert_rate_limit_headers, retry_after_secs, HeaderStyle};
use crate::{DenialReason, Policy, RateLimited};
use axum::http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
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
impl IntoResponse for RateLimited {
    fn into_response(self) -> Response {
        denial_response(&self, HeaderStyle::Draft)
    }
}

/// The response for a denial, with the header fields of `style`.
///
/// - A denial by the limit: `429`, `Retry-After` in whole seconds rounded
///   up (absent when the cost can never pass), `RateLimit-Policy` and
///   `RateLimit` (see [`rate_limit_headers`](super::rate_limit_headers)).
/// - A denial because the store could not answer or the named policy is
///   not configured (`on_error = "deny"`, any [`RateLimited::reason`] but
///   [`DenialReason::Limited`]): `503 Service Unavailable`, with
///   `Retry-After` only if the decision names a wait (the store's return
///   cannot be known, so in practice none) and no `RateLimit` fields, since
///   no store state was read.
/// - The body, `application/problem+json` (RFC 9457): `type`
///   (`about:blank`), `title`, `status`, `detail` (the denial's `Display`:
///   the limiter and the rule, never the key; the limiter's name only when
///   it was given, never the module path `#[rate_limit]` names a limiter
///   by when it has no `name = "..."`) and `retry_after` in seconds when known.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::http::{denial_response, HeaderStyle};
/// use redlimit::{Limiter, ManualClock, Policy, Store};
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("login", Policy::gcra("1/1s", 0)?, &store);
/// limiter.limit("203.0.113.9", 1).await.unwrap();
/// let denied = limiter.limit("203.0.113.9", 1).await.unwrap_err();
///
/// let response = denial_response(&denied, HeaderStyle::DraftAndLegacy);
/// assert_eq!(response.headers()["x-ratelimit-limit"], "1");
/// assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
/// assert_eq!(response.headers()["x-ratelimit-reset"], "1");
/// let body = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
/// assert_eq!(
///     std::str::from_utf8(&body).unwrap(),
///     r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limited by `login` (gcra 1/1s burst 0); retry after 1s","retry_after":1}"#
/// );
/// # Ok(()) }
/// ```
pub fn denial_response(denied: &RateLimited, style: HeaderStyle) -> Response {
    respond(denied, denied.policy(), style)
}

/// [`denial_response`] when the caller already holds the policy.
pub(crate) fn respond(denied: &RateLimited, policy: Option<&Policy>, style: HeaderStyle) -> Response {
    let limited = denied.reason() == DenialReason::Limited;
    let status = if limited { StatusCode::TOO_MANY_REQUESTS } else { StatusCode::SERVICE_UNAVAILABLE };
    let retry_after = denied.retry_after().map(retry_after_secs);
    let mut response = problem(status, &denied.public_detail(), retry_after);
    let headers = response.headers_mut();
    match policy {
        Some(policy) if limited => insert_rate_limit_headers(headers, policy, denied.decision(), style),
        _ => {
            if let Some(secs) = retry_after {
                headers.insert(RETRY_AFTER, HeaderValue::from(secs));
            }
        }
    }
    response
}

/// A problem+json response (RFC 9457) of `status` saying `detail`.
pub(crate) fn problem(status: StatusCode, detail: &str, retry_after: Option<u64>) -> Response {
    let mut body = String::from(r#"{"type":"about:blank","title":"#);
    json_string(&mut body, status.canonical_reason().unwrap_or("Error"));
    let _ = write!(body, r#","status":{},"detail":"#, status.as_u16());
    json_string(&mut body, detail);
    if let Some(secs) = retry_after {
        let _ = write!(body, r#","retry_after":{secs}"#);
    }
    body.push('}');
    let mut response = (status, body).into_response();
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response
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
