//! [`RateLimitLayer`]'s options: how a request is keyed, charged, answered
//! and exempted (`layer.rs` builds the layer and says where its limiter
//! comes from).

use super::cost::RequestCost;
use super::fields::headers::HeaderStyle;
use super::fields::quota::QuotaUnit;
use super::key::{KeyBy, MissingKey};
use super::RateLimitLayer;
use crate::limiter::on_error::OnError;
use crate::rate_limited::RateLimited;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;

impl RateLimitLayer {
    /// Counts requests under `key` (default: client IP, no trusted proxy).
    pub fn key(mut self, key: KeyBy) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).key = key;
        self
    }

    /// Permits each request takes (default 1), in place of a
    /// [`cost_by`](Self::cost_by) set before it (the last one set wins). The
    /// header fields count whole requests of this cost: under `10/1m` at a
    /// cost of 2, `q=5`.
    pub fn cost(mut self, cost: u64) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).cost = RequestCost::Fixed(cost);
        self
    }

    /// Charges each request the permits `cost_of` computes from it (items
    /// in a batch, a weight by method or route, an upload's
    /// `Content-Length`), in place of a fixed [`cost`](Self::cost) set
    /// before it (the last one set wins). Called once per counted request,
    /// after its key is found: never for an exempt request or one without a
    /// key.
    ///
    /// - The header fields count permits, not requests (requests no longer
    ///   cost the same): `q` is the policy's own quota, `r` what is left
    ///   after this request's cost, and a denial's `Retry-After` the wait
    ///   until this request's cost would pass.
    /// - The library's conventions hold per request: a cost of 0 takes
    ///   nothing and states the key; a denied request takes nothing; a cost
    ///   above what the policy can ever admit is denied with no
    ///   `Retry-After` and a `detail` saying it can never pass.
    /// - `None` means the request does not say what it costs (a missing or
    ///   malformed header): it is answered `400 Bad Request` (problem+json),
    ///   charged nothing, and never reaches the route. To charge such
    ///   requests a default instead, return it for them. A `cost_of` that
    ///   panics answers a plain `500`, charges nothing, and is logged once
    ///   at ERROR.
    /// - [`quota_unit`](Self::quota_unit) names what a permit is, when it is
    ///   not a request.
    /// - [`refund_on`](Self::refund_on) gives back exactly what the request
    ///   took; a dry run decides each request at its own cost, and so does
    ///   [`OnError::Local`] (under `Allow` a request the store could not
    ///   decide passes uncharged and unstated); under a
    ///   [`Policy::concurrency`](crate::Policy::concurrency) the request
    ///   holds that many permits while it is served.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::post, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// // A batch endpoint: each item of a batch costs one permit.
    /// let limiter = Limiter::new("batch", Policy::fixed_window("10/1m")?, &Store::memory().with_clock(ManualClock::new()));
    /// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?).cost_by(|request: &Request| {
    ///     request.headers().get("x-items")?.to_str().ok()?.parse().ok()
    /// });
    /// let mut app = Router::new().route("/batch", post(|| async { "done" })).layer(layer);
    /// let batch = |items: &str| {
    ///     let request = Request::builder().method("POST").uri("/batch").header("x-api-key", "k");
    ///     request.header("x-items", items).body(Body::empty()).unwrap()
    /// };
    ///
    /// let three = app.call(batch("3")).await.unwrap();
    /// assert_eq!(three.headers()["ratelimit-policy"], r#""10/1m";q=10;w=60"#);
    /// assert_eq!(three.headers()["ratelimit"], r#""10/1m";r=7;t=60"#);
    /// assert_eq!(app.call(batch("5")).await.unwrap().headers()["ratelimit"], r#""10/1m";r=2;t=60"#);
    /// let four = app.call(batch("4")).await.unwrap();
    /// assert_eq!((four.status().as_u16(), four.headers()["retry-after"].to_str().unwrap()), (429, "60"));
    /// assert_eq!(four.headers()["ratelimit"], r#""10/1m";r=2;t=60"#, "a denial takes nothing");
    /// assert_eq!(app.call(batch("2")).await.unwrap().headers()["ratelimit"], r#""10/1m";r=0;t=60"#);
    ///
    /// let too_big = app.call(batch("11")).await.unwrap();
    /// assert_eq!((too_big.status().as_u16(), too_big.headers().get("retry-after")), (429, None), "can never pass");
    /// assert_eq!(app.call(batch("many")).await.unwrap().status(), 400, "no cost can be read");
    /// # Ok(()) }
    /// ```
    pub fn cost_by(mut self, cost_of: impl Fn(&Request) -> Option<u64> + Send + Sync + 'static) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).cost = RequestCost::by(cost_of);
        self
    }

    /// What one permit is (default [`QuotaUnit::Requests`]): any other unit
    /// is stated as `qu` on `RateLimit-Policy`, and the fields count
    /// permits in it, even at a fixed [`cost`](Self::cost). For an upload
    /// charged by its size with [`cost_by`](Self::cost_by),
    /// [`QuotaUnit::ContentBytes`]. A concurrency policy's items keep their
    /// own unit, requests in flight.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, http::header::CONTENT_LENGTH, routing::put, Router};
    /// use redlimit::http::{KeyBy, QuotaUnit, RateLimitLayer};
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// // A megabyte of uploads per user an hour, charged by each upload's declared size.
    /// let limiter = Limiter::new("uploads", Policy::fixed_window("1000000/1h")?, &Store::memory().with_clock(ManualClock::new()));
    /// let layer = RateLimitLayer::from_limiter(limiter)
    ///     .key(KeyBy::header("x-user")?)
    ///     .cost_by(|request: &Request| request.headers().get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok())
    ///     .quota_unit(QuotaUnit::ContentBytes);
    /// let mut app = Router::new().route("/upload", put(|| async { "stored" })).layer(layer);
    /// let upload = |bytes: usize| {
    ///     let request = Request::builder().method("PUT").uri("/upload").header("x-user", "ann");
    ///     request.header(CONTENT_LENGTH, bytes).body(Body::from(vec![0u8; bytes])).unwrap()
    /// };
    ///
    /// let stored = app.call(upload(4096)).await.unwrap();
    /// assert_eq!(stored.headers()["ratelimit-policy"], r#""1000000/1h";q=1000000;w=3600;qu="content-bytes""#);
    /// assert_eq!(stored.headers()["ratelimit"], r#""1000000/1h";r=995904;t=3600"#);
    /// # Ok(()) }
    /// ```
    pub fn quota_unit(mut self, unit: QuotaUnit) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).unit = unit;
        self
    }

    /// What a request without a key gets (default [`MissingKey::Reject`]).
    pub fn missing_key(mut self, missing_key: MissingKey) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).missing_key = missing_key;
        self
    }

    /// Whether allowed responses carry `RateLimit-Policy` and `RateLimit` (default true).
    pub fn headers_on_allowed(mut self, on: bool) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).headers_on_allowed = on;
        self
    }

    /// Which header fields to send (default [`HeaderStyle::Draft`]; the
    /// legacy `X-RateLimit-*` set is opt-in).
    pub fn header_style(mut self, style: HeaderStyle) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).style = style;
        self
    }

    /// What a request does when the store cannot decide (default
    /// [`OnError::Allow`]). A layer given a limiter
    /// ([`from_limiter`](Self::from_limiter), a tier's or a route's)
    /// uses that limiter's setting and ignores this.
    pub fn on_error(mut self, on_error: OnError) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).on_error = on_error;
        self
    }

    /// Puts the layer in dry run (shadow mode): every request is decided and
    /// recorded as usual, and one that would be denied reaches the route
    /// anyway, counted in `redlimit_dry_run_denials_total` (and as
    /// `outcome="dry_run_denied"`, never `denied`, in
    /// `redlimit_decisions_total`) and logged
    /// ([`Limiter::with_dry_run`](crate::Limiter::with_dry_run)).
    ///
    /// Clients see nothing of the trial: its responses carry no
    /// `RateLimit-Policy`, `RateLimit` or `Retry-After`, since a client
    /// pacing by them would slow down for a limit that is not in force
    /// ([`dry_run_fields`](Self::dry_run_fields) sends the first two). The
    /// same holds for a limiter or policy in dry run, and under
    /// [`set_dry_run`](crate::set_dry_run).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let limiter = Limiter::new("trial", Policy::fixed_window("1/1m")?, &Store::memory().with_clock(ManualClock::new()));
    /// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?).dry_run(true);
    /// let mut app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
    /// let request = || Request::builder().uri("/").header("x-api-key", "k1").body(Body::empty()).unwrap();
    /// app.call(request()).await.unwrap();
    /// let would_deny = app.call(request()).await.unwrap();
    /// assert_eq!(would_deny.status(), 200);
    /// assert_eq!(would_deny.headers().get("ratelimit"), None, "invisible to clients");
    /// # Ok(()) }
    /// ```
    pub fn dry_run(mut self, on: bool) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).dry_run = on;
        self
    }

    /// Whether a request let through by a limiter in dry run carries that
    /// limiter's `RateLimit-Policy` and `RateLimit` (default false: a trial
    /// is invisible to clients). For a trial whose clients know of it and
    /// want to see where they stand: `r=0` once the trial would deny. A
    /// request let through is never told `Retry-After`: nothing refused it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let limiter = Limiter::new("trial", Policy::fixed_window("1/1m")?, &Store::memory().with_clock(ManualClock::new()));
    /// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?).dry_run(true).dry_run_fields(true);
    /// let mut app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
    /// let request = || Request::builder().uri("/").header("x-api-key", "k1").body(Body::empty()).unwrap();
    /// app.call(request()).await.unwrap();
    /// let would_deny = app.call(request()).await.unwrap();
    /// assert_eq!(would_deny.status(), 200);
    /// assert_eq!(would_deny.headers()["ratelimit"], r#""1/1m";r=0;t=60"#);
    /// assert_eq!(would_deny.headers().get("retry-after"), None);
    /// # Ok(()) }
    /// ```
    pub fn dry_run_fields(mut self, on: bool) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).dry_run_fields = on;
        self
    }

    /// Gives a request's permits back when `refund_on` returns true for its
    /// response's status: a request the server failed (say
    /// `StatusCode::is_server_error`) need not cost the client its quota.
    ///
    /// The refund is made before the response leaves, and the response's
    /// `RateLimit` field states the key after it. It gives back only what
    /// the store took: not a request let through by `on_error` or by a dry
    /// run over the limit. Under a `sliding_window` or `sliding_log` policy,
    /// which keep no refunds ([`Limiter::refund`](crate::Limiter::refund)),
    /// it gives nothing back and says so once at WARN; a concurrency
    /// policy's permit comes back when the response is sent anyway. A refund
    /// the store could not make leaves the permits taken, logged as an
    /// outage is.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, http::StatusCode, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let limiter = Limiter::new("search", Policy::fixed_window("2/1m")?, &Store::memory().with_clock(ManualClock::new()));
    /// let layer = RateLimitLayer::from_limiter(limiter)
    ///     .key(KeyBy::header("x-api-key")?)
    ///     .refund_on(|status: StatusCode| status.is_server_error());
    /// let upstream_down = || async { StatusCode::BAD_GATEWAY };
    /// let mut app = Router::new().route("/", get(|| async { "found" })).route("/down", get(upstream_down)).layer(layer);
    /// let get = |path: &str| Request::builder().uri(path).header("x-api-key", "k").body(Body::empty()).unwrap();
    ///
    /// for _ in 0..3 {
    ///     let failed = app.call(get("/down")).await.unwrap();
    ///     assert_eq!(failed.status(), 502);
    ///     assert_eq!(failed.headers()["ratelimit"], r#""2/1m";r=2;t=60"#, "given back");
    /// }
    /// assert_eq!(app.call(get("/")).await.unwrap().headers()["ratelimit"], r#""2/1m";r=1;t=60"#);
    /// assert_eq!(app.call(get("/")).await.unwrap().status(), 200);
    /// assert_eq!(app.call(get("/")).await.unwrap().status(), 429);
    /// # Ok(()) }
    /// ```
    pub fn refund_on(mut self, refund_on: impl Fn(StatusCode) -> bool + Send + Sync + 'static) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).refund_on = Some(Arc::new(refund_on));
        self
    }

    /// Lets a request `exempt` returns true for through to the route
    /// uncounted and without `RateLimit` fields (health checks, internal
    /// callers), before its key is looked for. Called again, a request
    /// matching any of the predicates is exempt.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, routing::get, Router};
    /// use redlimit::http::{KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, Policy, Store};
    /// use tower_service::Service;
    ///
    /// let limiter = Limiter::new("api", Policy::fixed_window("1/1m")?, &Store::memory());
    /// let layer = RateLimitLayer::from_limiter(limiter)
    ///     .key(KeyBy::header("x-api-key")?)
    ///     .exempt(|request: &Request| request.uri().path() == "/health");
    /// let mut app = Router::new().route("/", get(|| async { "hi" })).route("/health", get(|| async { "ok" })).layer(layer);
    /// let get = |path: &str| Request::builder().uri(path).header("x-api-key", "k").body(Body::empty()).unwrap();
    ///
    /// for _ in 0..3 {
    ///     let health = app.call(get("/health")).await.unwrap();
    ///     assert_eq!((health.status().as_u16(), health.headers().get("ratelimit")), (200, None));
    /// }
    /// assert_eq!(app.call(get("/")).await.unwrap().status(), 200);
    /// assert_eq!(app.call(get("/")).await.unwrap().status(), 429);
    /// # Ok(()) }
    /// ```
    pub fn exempt(mut self, exempt: impl Fn(&Request) -> bool + Send + Sync + 'static) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).exempt.push(Arc::new(exempt));
        self
    }

    /// Builds the response to a denied request with `on_rejected`, from the
    /// denial, the request and the response the layer would send (`429`
    /// with its header fields, or `503` when the store could not decide and
    /// [`OnError::Deny`] denied: see [`RateLimited::reason`]). Requests
    /// answered for another reason (no key, no peer address, an unknown
    /// tier) keep their answer.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use axum::{body::Body, extract::Request, http::header, response::Response, routing::get, Router};
    /// use redlimit::http::{retry_after_secs, KeyBy, RateLimitLayer};
    /// use redlimit::{Limiter, ManualClock, Policy, RateLimited, Store};
    /// use tower_service::Service;
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("api", Policy::fixed_window("1/1m")?, &store);
    /// let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key")?).on_rejected(
    ///     |denied: &RateLimited, _request: &Request, default: Response| {
    ///         // Keep the status and the header fields; say it in plain text.
    ///         let wait = denied.retry_after().map_or(0, retry_after_secs);
    ///         let (mut parts, _) = default.into_parts();
    ///         parts.headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain"));
    ///         Response::from_parts(parts, Body::from(format!("slow down: {wait}s")))
    ///     },
    /// );
    /// let mut app = Router::new().route("/", get(|| async { "hi" })).layer(layer);
    /// let request = || Request::builder().uri("/").header("x-api-key", "k").body(Body::empty()).unwrap();
    /// app.call(request()).await.unwrap();
    /// let denied = app.call(request()).await.unwrap();
    /// assert_eq!((denied.status().as_u16(), denied.headers()["retry-after"].to_str().unwrap()), (429, "60"));
    /// assert_eq!(denied.headers()["content-type"], "text/plain");
    /// let body = axum::body::to_bytes(denied.into_body(), 1024).await.unwrap();
    /// assert_eq!(&body[..], b"slow down: 60s");
    /// # Ok(()) }
    /// ```
    pub fn on_rejected(
        mut self,
        on_rejected: impl Fn(&RateLimited, &Request, Response) -> Response + Send + Sync + 'static,
    ) -> RateLimitLayer {
        Arc::make_mut(&mut self.shared).on_rejected = Some(Arc::new(on_rejected));
        self
    }
}
