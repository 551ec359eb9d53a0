//! The names of configured policies (`policy = "search"`).

use crate::GrammarError;

/// The longest policy name accepted.
pub const MAX_POLICY_NAME_LEN: usize = 64;

/// Checks a policy name: 1 to 64 ASCII letters, digits, `_` or `-`, so it is
/// written as a bare TOML key (`[policies.search]`) and reads the same in the
/// attribute, the configuration and every error message.
///
/// ```
/// use redlimit_grammar::check_policy_name;
/// assert!(check_policy_name("search-v2").is_ok());
/// assert!(check_policy_name("search api").unwrap_err().message().contains("letters, digits"));
/// assert!(check_policy_name("").is_err());
/// ```
pub fn check_policy_name(name: &str) -> Result<(), GrammarError> {
    if name.is_empty() {
        return Err(GrammarError::new("empty policy name: write the name of a configured policy, like \"search\""));
    }
    if name.len() > MAX_POLICY_NAME_LEN {
        return Err(GrammarError::new(format!(
            "policy name is {} bytes long; at most {MAX_POLICY_NAME_LEN} are allowed",
            name.len()
        )));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
        return Err(GrammarError::new(format!(
            "policy name \"{}\" contains {bad:?}: use only ASCII letters, digits, `_` and `-` (a bare TOML key, as in `[policies.search]`)",
            crate::quote(name)
        )));
    }
    Ok(())
}
