#![warn(missing_docs)]
//! The policy grammar of `redlimit`, in one place.
//!
//! The `#[rate_limit]` macro validates its arguments with this crate at compile
//! time and the runtime's `Policy` builder validates with it at run time, so a
//! policy that compiles as an attribute is exactly a policy the builder accepts.
//!
//! ```
//! use redlimit_grammar::{parse_duration, parse_strategies};
//!
//! assert_eq!(parse_duration("500ms").unwrap(), 500_000); // microseconds
//! let s = parse_strategies("10/1s,100/1m").unwrap();
//! assert_eq!((s[1].limit, s[1].window_us), (100, 60_000_000));
//! ```

mod calendar;
mod duration;
mod error;
mod headroom;
mod options;
mod policy_name;
mod policy_text;
mod quote;
mod spec;
mod strategy;

pub use calendar::{Calendar, CalendarUnit};
pub use duration::{check_duration, format_duration, parse_duration, MAX_DURATION_US};
pub use error::GrammarError;
pub use headroom::{parse_headroom, split_headroom, Headroom, Priority, HEADROOM_WORD};
pub use options::{ATTRIBUTE_OPTIONS, POLICY_OPTIONS};
pub use policy_name::{check_policy_name, MAX_POLICY_NAME_LEN};
pub use policy_text::{parse_policy, policy_example, PolicyText, DRY_RUN_WORD};
pub use quote::{quote, Quoted, MAX_QUOTED};
pub use spec::{
    AlgorithmKind, Param, PolicySpec, Refill, DEFAULT_LEASE_US, MAX_EXACT, MAX_LEASE_US, MAX_STRATEGIES, MIN_LEASE_US,
};
pub use strategy::{
    check_rate, check_strategy, parse_rate, parse_strategies, parse_strategy, Rate, Strategy, MAX_LIMIT,
};
