//! Named policies, loaded from configuration and reloadable at run time.
//!
//! `#[rate_limit(policy = "search", key = "user:<user>")]` takes its limits
//! from the policy named `search` instead of the attribute. Policies are
//! TOML, one table each, with the attribute's option names and grammar:
//!
//! ```toml
//! [policies.search]
//! algo = "sliding_log"
//! strategies = "10/1s,100/1m"
//!
//! [policies.upload]
//! algo = "token_bucket"
//! capacity = 20
//! rate = "1/3s"
//! ```
//!
//! or a policy's one-line text, as `Policy` prints it and parses it back
//! (`[policies]` then `upload = "token_bucket capacity 20 rate 1/3s"`).
//!
//! They come from, in this order of precedence:
//! - [`load`] (a file) or [`load_str`] (text) at start-up: every problem is
//!   returned at once, each naming the source, line, policy and rule;
//! - otherwise, on the first call that needs one, the environment:
//!   `REDLIMIT_POLICIES_FILE` names a TOML file, or `REDLIMIT_POLICIES`
//!   holds the TOML itself (not both). A failure there is logged once at
//!   ERROR, and each call naming a policy is then settled by its `on_error`.
//!
//! [`reload`] reads the same source again and swaps the whole set at once;
//! a failed reload keeps the old set and returns why. Annotated functions
//! pick the new policy up on their next call. A key's state carries over to
//! any policy of the same algorithm (the same stored keys are used, so 7 of
//! 10 used stays 7 used under a limit of 20; README, "Limits as data", says
//! what each algorithm keeps); another algorithm uses fresh keys instead of
//! misreading the old ones.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use redlimit::{rate_limit, RateLimited};
//!
//! #[rate_limit(policy = "search", key = "user:<user>")]
//! async fn search(user: u32) -> Result<(), RateLimited> { Ok(()) }
//!
//! # redlimit::init(redlimit::Store::memory())?;
//! redlimit::policies::load_str("policies.toml", r#"
//!     [policies.search]
//!     algo = "fixed_window"
//!     strategies = "2/1h"
//! "#)?;
//! search(1).await?;
//! search(1).await?;
//! assert_eq!(search(1).await.unwrap_err().decision().limit, 2);
//!
//! redlimit::policies::load_str("policies.toml", r#"
//!     [policies.search]
//!     algo = "fixed_window"
//!     strategies = "3/1h"
//! "#)?;
//! let third = search(1).await; // the count (2) carried over; the limit is now 3
//! assert!(third.is_ok());
//! assert_eq!(search(1).await.unwrap_err().decision().limit, 3);
//! # Ok(()) }
//! ```

pub use super::{LoadError, PolicySet, POLICIES_FILE_VAR, POLICIES_VAR};

use super::registry::{self, SetSource};
use crate::policy::Policy;
use std::path::Path;

/// Loads the policies of a TOML file and makes it the source [`reload`]
/// reads; returns how many policies it holds. On error the set in use
/// stays and every problem is returned (a later [`reload`] reads this file
/// again, so fixing it and reloading works).
///
/// ```
/// let err = redlimit::policies::load("/nonexistent/policies.toml").unwrap_err();
/// assert!(err.to_string().starts_with("/nonexistent/policies.toml: cannot read the policies file"));
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<usize, LoadError> {
    registry::load(SetSource::File(path.as_ref().to_path_buf()))
}

/// Loads policies from TOML text; `origin` names it in error messages. A
/// [`reload`] afterwards parses the same text again.
pub fn load_str(origin: &str, text: &str) -> Result<usize, LoadError> {
    registry::load(SetSource::Text { origin: origin.to_string(), text: text.to_string() })
}

/// Loads policies from the environment now (`REDLIMIT_POLICIES_FILE` or
/// `REDLIMIT_POLICIES`), as the first call would, but returning every
/// problem: call it at start-up to fail fast on a bad configuration.
/// Neither variable set loads an empty set.
pub fn load_env() -> Result<usize, LoadError> {
    registry::load(SetSource::Env)
}

/// Reads the last source loaded again (the file, the text, or the
/// environment when policies came from it) and swaps the whole set at once.
/// On error the set in use stays and every problem is returned.
///
/// ```
/// # fn main() -> Result<(), redlimit::policies::LoadError> {
/// let path = std::env::temp_dir().join(format!("redlimit-doc-reload-{}.toml", std::process::id()));
/// std::fs::write(&path, "[policies.api]\nalgo = \"gcra\"\nrate = \"10/1s\"\n").unwrap();
/// redlimit::policies::load(&path)?;
///
/// std::fs::write(&path, "[policies.api]\nalgo = \"gcra\"\nrate = \"fast\"\n").unwrap();
/// assert!(redlimit::policies::reload().is_err());
/// assert_eq!(redlimit::policies::get("api").unwrap().to_string(), "gcra 10/1s burst 9"); // kept
///
/// std::fs::write(&path, "[policies.api]\nalgo = \"gcra\"\nrate = \"20/1s\"\n").unwrap();
/// redlimit::policies::reload()?;
/// assert_eq!(redlimit::policies::get("api").unwrap().to_string(), "gcra 20/1s burst 19");
/// # std::fs::remove_file(&path).unwrap();
/// # Ok(()) }
/// ```
pub fn reload() -> Result<usize, LoadError> {
    registry::reload()
}

/// The policy named `name` in the set in use, for code that builds its own
/// [`Limiter`](crate::Limiter). Such a limiter keeps the policy it was built
/// with; annotated functions follow reloads by themselves.
pub fn get(name: &str) -> Option<Policy> {
    registry::current().set.get(name).cloned()
}

/// The set in use (a snapshot: a later reload does not change it).
pub fn current() -> PolicySet {
    registry::current().set.clone()
}
