//! The attribute's option names, and which of them make a policy: the
//! `#[rate_limit]` macro takes them all, a policies document only a
//! policy's, and both name them in their errors.

/// Every option of `#[rate_limit]`, in the order the documentation lists them.
pub const ATTRIBUTE_OPTIONS: [&str; 24] = [
    "policy",
    "algo",
    "strategies",
    "precision",
    "capacity",
    "rate",
    "refill",
    "burst",
    "limit",
    "lease",
    "headroom",
    "key",
    "name",
    "cost",
    "priority",
    "on_limit",
    "max_wait",
    "fallback",
    "on_error",
    "refund_on",
    "settle",
    "dry_run",
    "prefetch",
    "crate",
];

/// The options that make a policy, in the attribute or a policies document
/// (a policy table takes these, no others).
///
/// ```
/// use redlimit_grammar::{ATTRIBUTE_OPTIONS, POLICY_OPTIONS};
///
/// assert!(POLICY_OPTIONS.contains(&"strategies") && !POLICY_OPTIONS.contains(&"key"));
/// assert!(POLICY_OPTIONS.iter().all(|option| ATTRIBUTE_OPTIONS.contains(option)));
/// ```
pub const POLICY_OPTIONS: [&str; 11] =
    ["algo", "strategies", "precision", "capacity", "rate", "refill", "burst", "limit", "lease", "dry_run", "headroom"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Param, DRY_RUN_WORD, HEADROOM_WORD};

    #[test]
    fn a_policy_option_is_the_algorithm_a_parameter_or_a_word_of_the_policy_text_and_an_attribute_option() {
        let mut expected = vec!["algo", DRY_RUN_WORD, HEADROOM_WORD];
        expected.extend(Param::ALL.map(Param::name));
        let mut policy = POLICY_OPTIONS.to_vec();
        expected.sort_unstable();
        policy.sort_unstable();
        assert_eq!(policy, expected);
        assert!(POLICY_OPTIONS.iter().all(|option| ATTRIBUTE_OPTIONS.contains(option)));
        let mut all = ATTRIBUTE_OPTIONS.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), ATTRIBUTE_OPTIONS.len(), "each option once");
    }
}
