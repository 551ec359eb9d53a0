//! Guides: each topic of redlimit in one page, with runnable examples.
//!
//! Start with [`getting_started`]; the [crate's front page](crate) lists
//! every guide with what it answers.

// The text of every guide is a Markdown file under `docs/guide/`, shipped
// with the crate; each example in it is a doctest.

#[doc = include_str!("../docs/guide/getting_started.md")]
pub mod getting_started {}

#[doc = include_str!("../docs/guide/attribute.md")]
pub mod attribute {}

#[doc = include_str!("../docs/guide/algorithms.md")]
pub mod algorithms {}

#[doc = include_str!("../docs/guide/redis.md")]
pub mod redis {}

#[doc = include_str!("../docs/guide/failures.md")]
pub mod failures {}

#[doc = include_str!("../docs/guide/clocks.md")]
pub mod clocks {}

#[doc = include_str!("../docs/guide/calendar.md")]
pub mod calendar {}

#[doc = include_str!("../docs/guide/concurrency.md")]
pub mod concurrency {}

#[doc = include_str!("../docs/guide/refunds.md")]
pub mod refunds {}

#[doc = include_str!("../docs/guide/settle.md")]
pub mod settle {}

#[doc = include_str!("../docs/guide/dry_run.md")]
pub mod dry_run {}

#[doc = include_str!("../docs/guide/policies.md")]
pub mod policies {}

#[doc = include_str!("../docs/guide/plan_changes.md")]
pub mod plan_changes {}

#[doc = include_str!("../docs/guide/prefetch.md")]
pub mod prefetch {}

#[doc = include_str!("../docs/guide/priorities.md")]
pub mod priorities {}

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
#[doc = include_str!("../docs/guide/http.md")]
pub mod http {}

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
#[doc = include_str!("../docs/guide/http_fields.md")]
pub mod http_fields {}

#[doc = include_str!("../docs/guide/testing.md")]
pub mod testing {}

#[doc = include_str!("../docs/guide/observability.md")]
pub mod observability {}

#[doc = include_str!("../docs/guide/performance.md")]
pub mod performance {}
