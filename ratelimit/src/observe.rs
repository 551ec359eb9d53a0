//! What a decision tells `tracing` and the `metrics` facade.
//!
//! Metrics (names are stable; labels never carry a key, which is user data
//! and unbounded):
//!
//! | name | kind | labels | what it counts |
//! |---|---|---|---|
//! | `redlimit_decisions_total` | counter | `limiter`, `algo`, `outcome` (`allowed` / `denied` / `dry_run_denied`) | every decision of `check`, `limit`, `wait`, annotated functions and layers, including denials answered by the deny cache and decisions `on_error` made while the store could not answer; not `peek`. A limiter in dry run (`Policy::with_dry_run`, `Limiter::with_dry_run`, `dry_run = true`, a layer's `dry_run`, `redlimit::set_dry_run`) denies nothing: what it would have denied is `dry_run_denied`, never `denied`, so a denial-rate alert stays quiet during a trial |
//! | `redlimit_dry_run_denials_total` | counter | `limiter`, `algo` | calls a limiter in dry run would have denied and let through (`limit`, `wait`, annotated functions, layers; not `check`, which lets nothing through) |
//! | `redlimit_store_errors_total` | counter | `kind` (`connection`: refused, reset, dropped, DNS, TLS; `auth`: credentials refused; `server`: Redis answered an error; `timeout`; `unavailable`: failing fast after one of those, or still connecting; `protocol`: an unexpected reply; `config`; `misuse`: a call made wrongly, see `Error::Misuse`) | every call the store could not decide, and every refund it could not make |
//! | `redlimit_prefetch_permits_total` | counter | `limiter`, `kind` (`prefetched`: taken from the store by a refill; `spent`: by calls; `returned`: unspent and refunded; `wasted`: unspent and not given back) | permits of a limiter with prefetch (`Limiter::with_prefetch`, `prefetch = k`); its decisions are counted above, one each |
//! | `redlimit_store_duration_seconds` | histogram | `limiter`, `algo` | how long a remote store (Redis) took to answer one call, successful or not; not recorded for the in-memory store or for denials the deny cache answered |
//!
//! A limiter registers its handles with the recorder installed when it makes
//! its first decision, so install the recorder (e.g. a Prometheus exporter)
//! before the first call, as with any `metrics` user.
//!
//! Tracing: every decision runs in a `redlimit.decision` span at DEBUG
//! (target `redlimit`) with `limiter`, `algo` and `cost`, and, once
//! decided, `outcome` (as the metrics name it: `allowed`, `denied`,
//! `dry_run_denied`, or `store_error`) and `remaining`. A store failure is logged per limiter, not per
//! call: its first failure is a WARN event from `limit` (and annotated
//! functions) saying whether `on_error` allowed or denied the call, then at
//! most one WARN per 10 s counting the calls settled meanwhile, and an INFO
//! event once the store answers again (`outage_log.rs`). Neither ever records the key. The span is built only
//! while some subscriber takes DEBUG events (so, with `tracing`'s `log`
//! feature, a program with no `tracing` subscriber at all does not see it
//! through the `log` crate either).

use crate::decision::Decision;
use crate::error::Error;
use metrics::{Counter, Histogram};
use std::time::Duration;
use tracing::field::Empty;
use tracing::Span;

/// `redlimit_decisions_total`.
pub const DECISIONS_TOTAL: &str = "redlimit_decisions_total";
/// `redlimit_dry_run_denials_total`.
pub const DRY_RUN_DENIALS_TOTAL: &str = "redlimit_dry_run_denials_total";
/// `redlimit_store_errors_total`.
pub const STORE_ERRORS_TOTAL: &str = "redlimit_store_errors_total";
/// `redlimit_store_duration_seconds`.
pub const STORE_DURATION_SECONDS: &str = "redlimit_store_duration_seconds";
/// Gauge: the concurrency permits this process holds, by `limiter`.
pub const PERMITS_HELD: &str = "redlimit_permits_held";
/// Counter: a prefetching limiter's permits, by `limiter` and `kind` (prefetched, spent, returned, wasted).
pub const PREFETCH_PERMITS_TOTAL: &str = "redlimit_prefetch_permits_total";
/// Counter: concurrency permits whose lease ended before their holder renewed it, by `limiter`.
pub const PERMIT_LEASES_LOST_TOTAL: &str = "redlimit_permit_leases_lost_total";

/// One limiter's metric handles, registered once so a decision costs an
/// increment, not a lookup by name and labels.
pub(crate) struct LimiterMetrics {
    allowed: Counter,
    denied: Counter,
    /// Denials of a limiter in dry run, which denies nothing.
    trial_denied: Counter,
    dry_run_denied: Counter,
    store_duration: Histogram,
}

impl LimiterMetrics {
    pub(crate) fn register(limiter: &str, algo: &'static str) -> LimiterMetrics {
        describe();
        let limiter = limiter.to_string();
        LimiterMetrics {
            allowed: metrics::counter!(DECISIONS_TOTAL, "limiter" => limiter.clone(), "algo" => algo, "outcome" => "allowed"),
            denied: metrics::counter!(DECISIONS_TOTAL, "limiter" => limiter.clone(), "algo" => algo, "outcome" => "denied"),
            trial_denied: metrics::counter!(DECISIONS_TOTAL, "limiter" => limiter.clone(), "algo" => algo, "outcome" => "dry_run_denied"),
            dry_run_denied: metrics::counter!(DRY_RUN_DENIALS_TOTAL, "limiter" => limiter.clone(), "algo" => algo),
            store_duration: metrics::histogram!(STORE_DURATION_SECONDS, "limiter" => limiter, "algo" => algo),
        }
    }

    /// Counts one decision; a denial by a limiter in dry run (`in_dry_run`)
    /// is a would-be denial: the call was, or would have been, let through.
    pub(crate) fn decided(&self, allowed: bool, in_dry_run: bool) {
        match (allowed, in_dry_run) {
            (true, _) => &self.allowed,
            (false, true) => &self.trial_denied,
            (false, false) => &self.denied,
        }
        .increment(1);
    }

    /// Counts a call a dry run let through that would have been denied.
    pub(crate) fn dry_run_denied(&self) {
        self.dry_run_denied.increment(1);
    }

    /// Records how long the remote store took.
    pub(crate) fn store_took(&self, elapsed: Duration) {
        self.store_duration.record(elapsed.as_secs_f64());
    }
}

/// A concurrency limiter's permits in this process.
pub(crate) struct PermitMetrics {
    held: metrics::Gauge,
    lost: Counter,
}

impl PermitMetrics {
    pub(crate) fn register(limiter: &str) -> PermitMetrics {
        describe();
        let limiter = limiter.to_string();
        PermitMetrics {
            held: metrics::gauge!(PERMITS_HELD, "limiter" => limiter.clone()),
            lost: metrics::counter!(PERMIT_LEASES_LOST_TOTAL, "limiter" => limiter),
        }
    }

    pub(crate) fn taken(&self) {
        self.held.increment(1.0);
    }

    pub(crate) fn given_back(&self) {
        self.held.decrement(1.0);
    }

    /// A lease that ended while its holder still ran: no longer held.
    pub(crate) fn lost(&self) {
        self.held.decrement(1.0);
        self.lost.increment(1);
    }
}

/// A prefetching limiter's counters: prefetched, spent, returned, wasted.
pub(crate) fn prefetch_counters(limiter: &str) -> [Counter; 4] {
    describe();
    ["prefetched", "spent", "returned", "wasted"]
        .map(|kind| metrics::counter!(PREFETCH_PERMITS_TOTAL, "limiter" => limiter.to_string(), "kind" => kind))
}

/// Describes the metrics to the recorder once per process.
fn describe() {
    static DESCRIBED: once_cell::sync::OnceCell<()> = once_cell::sync::OnceCell::new();
    DESCRIBED.get_or_init(|| {
        metrics::describe_counter!(
            DECISIONS_TOTAL,
            "Rate limit decisions, by limiter, algorithm and outcome (allowed, denied, or dry_run_denied: a limiter in dry run would have denied)."
        );
        metrics::describe_counter!(
            STORE_ERRORS_TOTAL,
            "Rate limit calls the store could not decide, by kind of failure."
        );
        metrics::describe_counter!(
            DRY_RUN_DENIALS_TOTAL,
            "Calls a rate limiter in dry run would have denied and let through, by limiter and algorithm."
        );
        metrics::describe_gauge!(PERMITS_HELD, "Concurrency permits this process holds, by limiter.");
        metrics::describe_counter!(
            PERMIT_LEASES_LOST_TOTAL,
            "Concurrency permits whose lease ended before their holder renewed it, by limiter."
        );
        metrics::describe_counter!(
            PREFETCH_PERMITS_TOTAL,
            "Permits of a prefetching rate limiter, by limiter and kind (prefetched, spent, returned, wasted)."
        );
        metrics::describe_histogram!(
            STORE_DURATION_SECONDS,
            metrics::Unit::Seconds,
            "Time the remote rate limit store took to answer one call."
        );
    });
}

/// Counts a call the store could not decide.
pub(crate) fn store_error(error: &Error) {
    metrics::counter!(STORE_ERRORS_TOTAL, "kind" => error_kind(error)).increment(1);
}

/// The `kind` label of a store failure: a small, fixed set.
pub(crate) fn error_kind(error: &Error) -> &'static str {
    match error {
        Error::Timeout(_) => "timeout",
        Error::Unavailable(_) => "unavailable",
        Error::Connection(_) => "connection",
        Error::Auth(_) => "auth",
        Error::Server(_) => "server",
        Error::Protocol(_) => "protocol",
        Error::InvalidPolicy(_) | Error::InvalidConfig(_) | Error::AlreadyInitialized => "config",
        Error::Misuse(_) => "misuse",
    }
}

/// Whether any subscriber may want the decision span: one load and a
/// compare, so a call with no DEBUG subscriber skips building it at all.
///
/// Without this, `tracing`'s `log` feature (turned on by dependencies such
/// as axum) makes a disabled span record its fields for the `log` crate on
/// every call while no subscriber was ever set, which cost more than the
/// in-memory decision itself.
#[inline]
pub(crate) fn decision_span_wanted() -> bool {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    tracing::Level::DEBUG <= STATIC_MAX_LEVEL && tracing::Level::DEBUG <= LevelFilter::current()
}

/// The span one decision runs in (disabled unless a subscriber wants DEBUG
/// from target `redlimit`).
pub(crate) fn decision_span(limiter: &str, algo: &'static str, cost: u64) -> Span {
    tracing::debug_span!(target: "redlimit", "redlimit.decision", limiter, algo, cost, outcome = Empty, remaining = Empty)
}

/// Writes the outcome into the decision's span, a would-be denial of a
/// limiter in dry run (`in_dry_run`) as such, as the metrics count it.
pub(crate) fn record(span: &Span, result: &Result<Decision, Error>, in_dry_run: bool) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(decision) => {
            let outcome = match (decision.allowed, in_dry_run) {
                (true, _) => "allowed",
                (false, true) => "dry_run_denied",
                (false, false) => "denied",
            };
            span.record("outcome", outcome);
            span.record("remaining", decision.remaining);
        }
        Err(error) => {
            span.record("outcome", "store_error");
            tracing::debug!(target: "redlimit", parent: span, kind = error_kind(error), %error, "rate limit store could not decide");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::error_kind;
    use crate::error::Error;
    use std::time::Duration;

    #[test]
    fn error_kinds_are_a_small_fixed_set() {
        use crate::error::Failure;
        assert_eq!(error_kind(&Error::Timeout(Duration::from_millis(250))), "timeout");
        assert_eq!(error_kind(&Error::Unavailable(Failure::new("down"))), "unavailable");
        assert_eq!(error_kind(&Error::Protocol("bad reply".into())), "protocol");
        assert_eq!(error_kind(&Error::Connection(Failure::new("refused"))), "connection");
        assert_eq!(error_kind(&Error::Auth(Failure::new("WRONGPASS"))), "auth");
        assert_eq!(error_kind(&Error::Server(Failure::new("ERR"))), "server");
        assert_eq!(error_kind(&Error::InvalidConfig("bad URL".into())), "config");
        assert_eq!(error_kind(&Error::Misuse("check on a concurrency limiter".into())), "misuse");
    }
}
