//! [`PolicySet`]: named, validated policies; [`LoadError`]: every problem found.

use crate::policy::Policy;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Named policies, each validated by the same grammar as the attribute.
///
/// ```
/// use redlimit::policies::PolicySet;
///
/// let set = PolicySet::parse("policies.toml", r#"
///     [policies.search]
///     algo = "sliding_log"
///     strategies = "10/1s,100/1m"
/// "#).unwrap();
/// assert_eq!(set.get("search").unwrap().to_string(), "sliding_log 10/1s,100/1m");
/// assert_eq!(set.names().collect::<Vec<_>>(), ["search"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    policies: BTreeMap<String, Policy>,
    origin: String,
}

impl PolicySet {
    /// Parses a TOML document; `origin` (a file name, an environment
    /// variable) starts every error message.
    pub fn parse(origin: &str, text: &str) -> Result<PolicySet, LoadError> {
        let mut policies = super::file::parse(origin, text).map_err(LoadError::new)?;
        // Labelled with their names, which HTTP header fields report.
        for (name, policy) in policies.iter_mut() {
            *policy = policy.clone().with_name(name);
        }
        Ok(PolicySet { policies, origin: origin.to_string() })
    }

    /// Reads and parses a TOML file; a missing or unreadable file is an error naming it.
    pub fn read(path: impl AsRef<Path>) -> Result<PolicySet, LoadError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| LoadError::new(vec![format!("{origin}: cannot read the policies file: {e}")]))?;
        PolicySet::parse(&origin, &text)
    }

    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<&Policy> {
        self.policies.get(name)
    }

    /// Every name, in alphabetical order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.policies.keys().map(String::as_str)
    }

    /// How many policies.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// No policies at all.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Where the set was read from (a path, `REDLIMIT_POLICIES`, ...).
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

/// Why policies could not be loaded: every problem found, each naming the
/// source, the line, the policy and the rule, one per line in `Display`.
///
/// ```
/// let err = redlimit::policies::PolicySet::parse("policies.toml", "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"0/1s\"\n").unwrap_err();
/// assert_eq!(err.to_string(), "policies.toml:3: policy \"search\": strategies \"0/1s\": a limit of 0 would deny every call; use at least 1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    problems: Vec<String>,
}

impl LoadError {
    pub(crate) fn new(problems: Vec<String>) -> LoadError {
        LoadError { problems }
    }

    /// Each problem, in the order of the lines they concern.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("\n"))
    }
}

impl std::error::Error for LoadError {}
