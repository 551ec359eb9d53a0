//! The header fields a decision is shown by: the `RateLimit-Policy` and
//! `RateLimit` fields, `Retry-After` and the legacy set (`headers.rs`), their
//! text (`field_text.rs`), the numbers they carry (`quota.rs`), and those of
//! what `#[rate_limit]` functions decided while a request was served
//! (`decisions.rs`).
//!
//! # What the fields promise
//!
//! A client that believes the fields is never denied. Both the -10 and -11
//! texts of draft-ietf-httpapi-ratelimit-headers are followed: -10's `t` (the
//! seconds until more quota comes back) and -11's (the span within which no
//! more than `r` can be used) are the same span for every algorithm here.
//!
//! - `q`/`w` (`PolicyItem`): `q` is what may be sent at once (a window's
//!   limit, a bucket's capacity, GCRA's `burst + 1`), `w` the whole seconds
//!   over which that much comes back, rounded up and never scaled (restating
//!   a sub-second rule per second would promise a burst the rule denies).
//! - `t` (`item_states`): a bucket's or GCRA's next permit is the time until
//!   full minus the permits still missing after it (at most 1 µs late, capped
//!   by a denial's exact `retry_after`). A window rule that denied reports its
//!   own retry time, so `Retry-After` (the latest) is never earlier than any
//!   denying rule's `t`; other window rules report their reset (an upper bound
//!   for the sliding ones).
//! - Names: a policy from a `PolicySet` carries its configured name; items
//!   take it, with `:<strategy>` when there are several. `qu` is written only
//!   when a permit is not a request (a caller's unit replaces the default).
//! - Concurrency: `q=<limit>;qu="concurrent-requests"` with no `w`, `r` with no
//!   `t`, no `Retry-After`: a permit comes back when its request ends, so no
//!   time can be stated truthfully. `r` is counted at admission. The response
//!   body holds the permit (`held_body.rs`) and gives it back before its last
//!   frame, so a client's next request never finds its own permit held.
//! - A fixed `cost` restates `q`, `r`, `t` in whole requests; a computed cost
//!   (`cost_by`) counts permits in the layer's `quota_unit`.
//! - A layer whose policy is chosen per request states the policy that
//!   decided that request. A response limited twice states both
//!   (`merge_rate_limit_fields`), except a denial's 429, whose own fields
//!   alone describe it.

pub(super) mod decisions;
mod field_text;
pub(super) mod headers;
pub(super) mod quota;
