#![warn(missing_docs)]
// docs.rs (nightly, `--cfg docsrs`) notes on each gated item the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc = include_str!("../docs/crate.md")]

mod algo;
mod backend;
mod call;
mod clock;
mod config;
mod decision;
mod error;
mod global;
pub mod guide;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod http;
mod key;
mod limiter;
pub mod observe;
mod permit;
mod policy;
mod prefetch;
mod rate_limited;
mod site;
mod store;

/// Everything `#[rate_limit]` output names, and the internals this
/// workspace's tests, examples and bench reach. Not a public API: it changes
/// with the macro, which is pinned to this crate, and with the scripts. Generated code writes every
/// path as `::redlimit::__private::...` (or the `crate = "..."` override), so
/// a user's `mod core {}`, `type Result` or `struct String` cannot change its meaning.
#[doc(hidden)]
pub mod __private {
    pub use crate::call::Call;
    pub use crate::key::buf::{KeyBuf, KeyWriter};
    pub use crate::key::{push_key_integer, push_key_value, KeyInteger};
    pub use crate::limiter::enforcement::OnLimit;
    pub use crate::permit::lost::watched;
    pub use crate::permit::Ticket;
    pub use crate::site::macro_support::{AsPolicy, Cost, DenialError, Failed, Fallback, IntoDenial, Settles};
    pub use crate::site::priority::AsPriority;
    pub use crate::site::{Site, SiteCall};
    pub use crate::{OnError, Policy, RateLimited};
    pub use redlimit_grammar::{Calendar, CalendarUnit, Rate, Strategy};

    // Internals that tests, examples and the bench reach: the stores' wire
    // format, and the scripts' text.
    #[cfg(feature = "cluster")]
    pub use crate::backend::redis::scripts::cross_slot_script_source;
    #[cfg(feature = "redis")]
    pub use crate::backend::redis::scripts::{
        fixed_window_counter_source, policy_argument, script_source, sliding_window_source,
    };
    pub use crate::backend::MemoryBackend;
    #[cfg(feature = "redis")]
    pub use crate::backend::RedisBackend;
    pub use crate::backend::{Answer, Backend, Binding, Bound, BoxFuture, Outcome, QuotaOutcome};
    pub use crate::call::{CallKind, PermitId, Refunded};
    pub use crate::key::key_prefix;
}

/// The attribute: see its own documentation for every option.
pub use redlimit_macros::rate_limit;

#[cfg(feature = "redis")]
pub use backend::RedisOptions;
pub use clock::{Clock, ManualClock, ServerClock, SystemClock};
pub use config::policies;
pub use decision::{Decision, Quota};
pub use error::{Error, Failure};
pub use global::scope::{in_current_scope, scope, Scope};
pub use global::{global, init, init_from_env, REDIS_URL_VAR};
pub use limiter::dry_run::{is_dry_run, set_dry_run, DRY_RUN_VAR};
pub use limiter::on_error::OnError;
pub use limiter::Limiter;
pub use permit::lost::{permit_lost, until_permit_lost};
pub use permit::Permit;
pub use policy::{Calendar, CalendarUnit, Headroom, Policy, Priority, Rate, Refill, Strategy};
pub use prefetch::{PrefetchStats, DEFAULT_PREFETCH_TTL};
pub use rate_limited::{DenialReason, Key, RateLimited};
pub use redlimit_grammar::AlgorithmKind;
/// What [`Policy::from_spec`] and [`AlgorithmKind`] name: a policy's
/// parameters as numbers, a parameter's name, and why one is rejected.
///
/// ```
/// use redlimit::{AlgorithmKind, GrammarError, Param, Policy, PolicySpec, Strategy};
///
/// let mut spec = PolicySpec::new(AlgorithmKind::SlidingLog);
/// spec.strategies = Some(vec![Strategy::new(5, 3_000_000)]);
/// assert_eq!(Policy::from_spec(spec)?.to_string(), "sliding_log 5/3s");
/// assert_eq!(AlgorithmKind::Gcra.params(), [Param::Rate, Param::Burst]);
/// let unknown: GrammarError = AlgorithmKind::from_name("bucket").unwrap_err();
/// assert!(unknown.message().starts_with("unknown algorithm `bucket`"));
/// # Ok::<(), redlimit::Error>(())
/// ```
pub use redlimit_grammar::{GrammarError, Param, PolicySpec};
pub use store::Store;
