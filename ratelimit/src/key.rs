//! Storage keys, and the escaping that keeps key templates collision-free.

use crate::policy::{Params, Policy};
use ratelimit_grammar::format_duration;
use std::fmt::{self, Write};

/// The bytes every storage key of one limiter starts with:
/// `<prefix>:<layout>:<name length>:<name>`. The length makes the split between
/// name and user key unambiguous (`("a:b", "c")` and `("a", "b:c")` differ).
///
/// `remote_server_clock`: the store is Redis (or another remote store) and
/// decides on its own clock, where a fixed window of one strategy is a
/// counter (see `backend::Counter`).
pub(crate) fn key_prefix(prefix: &str, policy: &Policy, name: &str, remote_server_clock: bool) -> Vec<u8> {
    format!("{prefix}:{}:{}:{name}", layout(policy, remote_server_clock), name.len()).into_bytes()
}

/// The algorithm, and whatever else decides how its stored state reads.
///
/// When a policy behind a name changes (a reload, a redeploy), state written
/// under the old policy is used as-is if it means the same under the new one,
/// and otherwise lives under another key, so it is never misread:
/// - `fixed_window`, `sliding_log`: a window's start and count, or a log of
///   hit times, mean the same under any strategies: `<algo>` only; but a
///   fixed window of one strategy on Redis's own clock is a counter whose
///   TTL is the window: `fixed_window/counter`.
/// - `gcra`: the state is a time (the theoretical arrival time): `gcra`.
/// - `sliding_window`: counts are filed by sub-window index `t / precision`,
///   which another precision reads as other times: `sliding_window/<precision>`.
/// - `token_bucket`, `leaky_bucket`: amounts are kept in units of the
///   reduced rate's period `p` (one permit = `p` units), which another `p`
///   reads as another amount: `<algo>/<p>`.
///
/// ```text
/// ratelimit:fixed_window:6:search:user:7          (several strategies, or a client clock)
/// ratelimit:fixed_window/counter:6:search:user:7  (one strategy, Redis's clock)
/// ratelimit:sliding_window/100ms:6:search:user:7
/// ratelimit:token_bucket/3s:6:upload:user:7      (rate "1/3s" or "2/6s")
/// ```
pub(crate) fn layout(policy: &Policy, remote_server_clock: bool) -> String {
    let algo = policy.algorithm().name();
    if remote_server_clock && crate::backend::Counter::of(policy).is_some() {
        return format!("{algo}/counter");
    }
    match &policy.params {
        Params::SlidingWindow { precision_us, .. } => format!("{algo}/{}", format_duration(*precision_us)),
        Params::TokenBucket { rate, .. } | Params::LeakyBucket { rate, .. } => format!("{algo}/{}", format_duration(rate.reduced().1)),
        Params::FixedWindow { .. } | Params::SlidingLog { .. } | Params::Gcra { .. } => algo.to_string(),
    }
}

/// User keys longer than this are stored by their SHA-1 instead, so a
/// hostile client cannot make Redis hold arbitrarily long key names.
pub const MAX_RAW_KEY_LEN: usize = 128;

/// The full storage key: the limiter's prefix, then `:` and the user key as
/// given, or `#` and the hex SHA-1 of a key longer than [`MAX_RAW_KEY_LEN`].
/// The separator tells the two forms apart, so no short key can pose as the
/// digest of a long one.
pub(crate) fn storage_key(limiter_prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let mut full = Vec::with_capacity(limiter_prefix.len() + 1 + key.len().min(40));
    full.extend_from_slice(limiter_prefix);
    if key.len() <= MAX_RAW_KEY_LEN {
        full.push(b':');
        full.extend_from_slice(key);
    } else {
        full.push(b'#');
        full.extend_from_slice(sha1_smol::Sha1::from(key).digest().to_string().as_bytes());
    }
    full
}

/// Appends `value`'s `Display` text to a key, escaping every ASCII byte that is
/// not a letter or digit as `%XX`.
///
/// Template literals between placeholders contain such a byte (the macro
/// enforces it), so the literal parts of a key can never be forged by a value:
/// `<a>:<b>` gives different keys for `("x:y", "z")` and `("x", "y:z")`.
///
/// ```
/// let mut key = String::new();
/// ratelimit::__private::push_key_value(&mut key, &"x:y");
/// key.push(':');
/// ratelimit::__private::push_key_value(&mut key, &"z");
/// assert_eq!(key, "x%3Ay:z");
/// ```
pub fn push_key_value(key: &mut String, value: &dyn fmt::Display) {
    // Most values (numbers, ids) need no escaping: write them as they are,
    // and escape only if the text written holds a byte that must be.
    let start = key.len();
    // Writing into a String cannot fail; a Display impl that errors leaves what it wrote.
    let _ = write!(key, "{value}");
    if key.as_bytes()[start..].iter().all(|b| !b.is_ascii() || b.is_ascii_alphanumeric()) {
        return;
    }
    let written = key.split_off(start);
    push_escaped(key, &written);
}

/// Appends `text`, escaping every ASCII byte that is not a letter or digit as `%XX`.
fn push_escaped(key: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() {
            // Writing into a String cannot fail.
            let _ = write!(key, "%{:02X}", c as u32);
        } else {
            key.push(c);
        }
    }
}
