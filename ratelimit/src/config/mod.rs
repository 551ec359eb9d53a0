//! Named policies from configuration: `#[rate_limit(policy = "search")]`
//! reads its limits from a TOML file or the environment, reloadable at run
//! time. The public surface is [`policies`].

mod file;
pub(crate) mod named;
pub mod policies;
pub(crate) mod registry;
mod set;

pub use set::{LoadError, PolicySet};

/// The environment variable holding the policies themselves, as TOML.
pub const POLICIES_VAR: &str = "REDLIMIT_POLICIES";

/// The environment variable naming a TOML file of policies.
pub const POLICIES_FILE_VAR: &str = "REDLIMIT_POLICIES_FILE";
