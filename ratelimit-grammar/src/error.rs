use std::fmt;

/// Why a duration, strategy, rate or policy was rejected; the message says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarError {
    message: String,
}

impl GrammarError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        GrammarError { message: message.into() }
    }

    /// The human-readable reason.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GrammarError {}
