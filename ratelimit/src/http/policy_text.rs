//! Reading a [`Policy`] back from its `Display` text, which is all a
//! [`RateLimited`](crate::RateLimited) carries of it.

use crate::Policy;

/// The policy whose `Display` is `text` (`sliding_window 10/1s precision 100ms`,
/// `token_bucket capacity 10 rate 1/3s`, `gcra 1/1s burst 4`), or `None`.
pub(crate) fn parse_policy_text(text: &str) -> Option<Policy> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let policy = match words.as_slice() {
        ["fixed_window", strategies] => Policy::fixed_window(strategies),
        ["sliding_log", strategies] => Policy::sliding_log(strategies),
        ["sliding_window", strategies, "precision", precision] => Policy::sliding_window(strategies, precision),
        ["token_bucket", "capacity", capacity, "rate", rate] => Policy::token_bucket(capacity.parse().ok()?, rate),
        ["leaky_bucket", "capacity", capacity, "rate", rate] => Policy::leaky_bucket(capacity.parse().ok()?, rate),
        ["gcra", rate, "burst", burst] => Policy::gcra(rate, burst.parse().ok()?),
        _ => return None,
    };
    policy.ok()
}

#[cfg(test)]
mod tests {
    use super::parse_policy_text;
    use crate::Policy;

    #[test]
    fn every_algorithm_reads_back_from_its_display() {
        let policies = [
            Policy::fixed_window("10/1s,100/1m").unwrap(),
            Policy::sliding_log("5/250ms").unwrap(),
            Policy::sliding_window("10/1s,60/1m", "100ms").unwrap(),
            Policy::token_bucket(10, "1/3s").unwrap(),
            Policy::leaky_bucket(7, "1000/1s").unwrap(),
            Policy::gcra("1/1s", 4).unwrap(),
            Policy::gcra("1/1s", 0).unwrap(),
        ];
        for policy in policies {
            assert_eq!(parse_policy_text(&policy.to_string()).as_ref(), Some(&policy), "{policy}");
        }
    }

    #[test]
    fn other_text_is_none() {
        for text in ["", "fixed_window", "gcra 1/1s burst x", "token_bucket 10 1/3s", "fixed_window 0/1s"] {
            assert_eq!(parse_policy_text(text), None, "{text:?}");
        }
    }
}
