//! The header fields a decision is shown by: the `RateLimit-Policy` and
//! `RateLimit` fields, `Retry-After` and the legacy set (`headers.rs`), their
//! text (`field_text.rs`), the numbers they carry (`quota.rs`), and those of
//! what `#[rate_limit]` functions decided while a request was served
//! (`decisions.rs`).

pub(super) mod decisions;
mod field_text;
pub(super) mod headers;
pub(super) mod quota;
