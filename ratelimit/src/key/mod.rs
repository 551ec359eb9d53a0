//! Storage keys, and the escaping that keeps key templates collision-free.

pub(crate) mod buf;

use crate::key::buf::KeyWriter;
use crate::policy::{Params, Policy};
use std::fmt::{self, Write};

/// The bytes every storage key of one limiter starts with:
/// `<prefix>:<layout>:<name length>:<name>`. The prefix holds no `:` (it is
/// escaped) and the layout none, so the first two `:` end them; the length
/// makes the split between name and user key unambiguous (`("a:b", "c")` and
/// `("a", "b:c")` differ). No prefix, name and key can spell another's.
///
/// ```
/// use redlimit::__private::key_prefix;
/// use redlimit::Policy;
///
/// let prefix = key_prefix("redlimit", &Policy::gcra("1/1s", 2).unwrap(), "login");
/// assert_eq!(prefix, b"redlimit:gcra/v2:5:login");
/// ```
pub fn key_prefix(prefix: &str, policy: &Policy, name: &str) -> Vec<u8> {
    // One buffer, written in place: a policy chosen per call binds per call.
    let mut key = String::with_capacity(prefix.len() + name.len() + 40);
    escape_prefix(&mut key, prefix);
    key.push(':');
    write_layout(&mut key, policy);
    // Writing into a String cannot fail.
    let _ = write!(key, ":{}:{name}", name.len());
    key.into_bytes()
}

/// A store's prefix with `%` and `:` written as `%25` and `%3A`: a prefix
/// without them (`redlimit`, `app-a`) reads as given.
fn escape_prefix(escaped: &mut String, prefix: &str) {
    for c in prefix.chars() {
        match c {
            '%' => escaped.push_str("%25"),
            ':' => escaped.push_str("%3A"),
            c => escaped.push(c),
        }
    }
}

/// The algorithm, the version of its stored state's format, and whatever
/// else decides how that state reads: `<algo>/v<version>[/trial]`.
///
/// The version is in every key so that a change of a state's format can
/// never misread state an older build wrote: during a rolling deploy old
/// and new builds each keep their own keys. A change of format bumps its
/// layout's version here; the old keys expire by their TTL.
///
/// When a policy behind a name changes (a reload, a redeploy), state written
/// under the old policy is used as-is if it means the same under the new one,
/// and otherwise lives under another key, so it is never misread:
/// - `fixed_window`, `sliding_log`: a window's start and count, or a log of
///   admitted calls' times and weights, mean the same under any strategies:
///   no detail. A fixed window of one strategy on Redis's own clock is kept
///   as a counter whose TTL is the window, under the same key as the hash
///   of starts and counts: each script reads the other's form as its first
///   strategy, so a policy gaining or losing strategies keeps counting. Each
///   window records its length (the counter: the window it was written
///   under), so a window is judged from its start by the policy's length,
///   and one a policy lacks runs on by its own, counting every call.
/// - `token_bucket`, `leaky_bucket`, `gcra`: the state records the rate
///   its amounts are counted in, and a call under another rate converts
///   them (the same permits owed, rounded up): no detail.
/// - `concurrency`: the leases held; a change of limit or lease judges
///   them by the new numbers: no detail.
/// - `sliding_window`: the state records the precision its sub-windows were
///   counted at, and a call under another one moves them first: no detail.
///
/// A trial (a policy bound in dry run: [`Policy::with_dry_run`], or a
/// limiter's `with_dry_run`) ends its layout with `/trial`: it counts what
/// it would have admitted in keys of its own, so it never spends the count
/// of the enforced policy of the same name and key.
///
/// ```text
/// redlimit:fixed_window/v3:6:search:user:7         (a hash, or one strategy's counter)
/// redlimit:sliding_window/v3:6:search:user:7       (whatever the precision)
/// redlimit:token_bucket/v2:6:upload:user:7
/// redlimit:gcra/v2:6:search:user:7
/// redlimit:concurrency/v1:7:exports:tenant:3
/// redlimit:fixed_window/v3/trial:6:search:user:7   (the same policy in dry run)
/// ```
fn write_layout(key: &mut String, policy: &Policy) {
    key.push_str(policy.algorithm().name());
    key.push('/');
    let format = match &policy.params {
        Params::SlidingWindow { .. } => SLIDING_WINDOW_FORMAT,
        Params::TokenBucket { .. } | Params::LeakyBucket { .. } => BUCKET_FORMAT,
        Params::FixedWindow { .. } => FIXED_WINDOW_FORMAT,
        Params::SlidingLog { .. } => SLIDING_LOG_FORMAT,
        Params::Gcra { .. } => GCRA_FORMAT,
        Params::Concurrency { .. } => CONCURRENCY_FORMAT,
    };
    key.push_str(format);
    if policy.is_dry_run() {
        key.push_str(TRIAL);
    }
}

/// The last part of a trial's layout: no layout's own detail is this word.
const TRIAL: &str = "/trial";

/// [`write_layout`]'s text, for the tests.
#[cfg(all(test, feature = "redis"))]
pub(crate) fn layout(policy: &Policy) -> String {
    let mut layout = String::new();
    write_layout(&mut layout, policy);
    layout
}

// The version of each stored state's format (the Lua header of each script
// describes the format).
const FIXED_WINDOW_FORMAT: &str = "v3";
const SLIDING_WINDOW_FORMAT: &str = "v3";
const SLIDING_LOG_FORMAT: &str = "v3";
const BUCKET_FORMAT: &str = "v2";
const GCRA_FORMAT: &str = "v2";
const CONCURRENCY_FORMAT: &str = "v1";

/// User keys longer than this are stored by their SHA-1 instead, so a
/// hostile client cannot make Redis hold arbitrarily long key names.
pub const MAX_RAW_KEY_LEN: usize = 128;

/// The full storage key: the limiter's prefix, then `:` and the user key as
/// given, or `#` and the hex SHA-1 of a key longer than [`MAX_RAW_KEY_LEN`].
/// The separator tells the two forms apart, so no short key can pose as the
/// digest of a long one.
#[cfg(feature = "redis")]
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
/// Generated code writes into a [`KeyBuf`](crate::__private::KeyBuf).
///
/// ```
/// let mut key = String::new();
/// redlimit::__private::push_key_value(&mut key, &"x:y");
/// key.push(':');
/// redlimit::__private::push_key_value(&mut key, &"z");
/// assert_eq!(key, "x%3Ay:z");
/// ```
pub fn push_key_value<K: KeyWriter>(key: &mut K, value: &dyn fmt::Display) {
    // Most values (numbers, ids) need no escaping: write them as they are,
    // and escape only if the text written holds a byte that must be.
    let start = key.written().len();
    // Writing a key cannot fail; a Display impl that errors leaves what it wrote.
    let _ = write!(key, "{value}");
    if key.written()[start..].iter().all(|b| !b.is_ascii() || b.is_ascii_alphanumeric()) {
        return;
    }
    let written = key.take_from(start);
    push_escaped(key, &written);
}

/// Appends an integer's key text: exactly what [`push_key_value`] writes
/// for it (a minus sign escaped as `%2D`), without going through `fmt`.
/// The macro calls it for an argument declared with an integer type.
///
/// ```
/// let mut key = String::from("user:");
/// redlimit::__private::push_key_integer(&mut key, &-42i32);
/// let mut by_display = String::from("user:");
/// redlimit::__private::push_key_value(&mut by_display, &-42i32);
/// assert_eq!((key.as_str(), by_display.as_str()), ("user:%2D42", "user:%2D42"));
/// ```
pub fn push_key_integer<K: KeyWriter, T: KeyInteger + ?Sized>(key: &mut K, value: &T) {
    let (negative, magnitude) = value.sign_and_magnitude();
    if negative {
        key.push_text("%2D");
    }
    // Digits never need escaping: written as they are, without `fmt`.
    key.push_text(itoa::Buffer::new().format(magnitude));
}

/// An integer a key can hold (every primitive up to 64 bits, and references to one).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a primitive integer, but `#[rate_limit]` read its key argument's type as one",
    note = "is a type named like an integer (`u64`, `i32`, ...) in scope? rename it, or give the argument its real type"
)]
pub trait KeyInteger {
    /// Whether the value is negative, and its absolute value.
    fn sign_and_magnitude(&self) -> (bool, u64);
}

macro_rules! key_integer {
    (unsigned: $($u:ty),*; signed: $($i:ty),*) => {
        $(impl KeyInteger for $u {
            fn sign_and_magnitude(&self) -> (bool, u64) {
                (false, *self as u64)
            }
        })*
        $(impl KeyInteger for $i {
            fn sign_and_magnitude(&self) -> (bool, u64) {
                (*self < 0, self.unsigned_abs() as u64)
            }
        })*
    };
}
key_integer!(unsigned: u8, u16, u32, u64, usize; signed: i8, i16, i32, i64, isize);

impl<T: KeyInteger + ?Sized> KeyInteger for &T {
    fn sign_and_magnitude(&self) -> (bool, u64) {
        (**self).sign_and_magnitude()
    }
}

impl<T: KeyInteger + ?Sized> KeyInteger for &mut T {
    fn sign_and_magnitude(&self) -> (bool, u64) {
        (**self).sign_and_magnitude()
    }
}

/// Appends `text`, escaping every ASCII byte that is not a letter or digit as `%XX`.
fn push_escaped<K: KeyWriter>(key: &mut K, text: &str) {
    for c in text.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() {
            // Writing a key cannot fail.
            let _ = write!(key, "%{:02X}", c as u32);
        } else {
            let _ = key.write_char(c);
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "redis")]
    use super::storage_key;
    use super::{key_prefix, push_key_integer, push_key_value};
    use crate::policy::Policy;

    #[test]
    fn every_layout_names_its_state_format_version() {
        let prefix = |policy: Policy| String::from_utf8(key_prefix("rl", &policy, "api"));
        assert_eq!(prefix(Policy::fixed_window("5/1s").unwrap()).unwrap(), "rl:fixed_window/v3:3:api");
        assert_eq!(prefix(Policy::fixed_window("5/1s,9/1m").unwrap()).unwrap(), "rl:fixed_window/v3:3:api");
        let window = Policy::sliding_window("5/1s", "100ms").unwrap();
        assert_eq!(prefix(window).unwrap(), "rl:sliding_window/v3:3:api");
        let coarser = Policy::sliding_window("5/1s", "500ms").unwrap();
        assert_eq!(prefix(coarser).unwrap(), "rl:sliding_window/v3:3:api", "one key whatever the precision");
        assert_eq!(prefix(Policy::sliding_log("5/1s").unwrap()).unwrap(), "rl:sliding_log/v3:3:api");
        assert_eq!(prefix(Policy::token_bucket(5, "2/6s").unwrap()).unwrap(), "rl:token_bucket/v2:3:api");
        assert_eq!(prefix(Policy::leaky_bucket(5, "1/3s").unwrap()).unwrap(), "rl:leaky_bucket/v2:3:api");
        assert_eq!(prefix(Policy::gcra("1/1s", 2).unwrap()).unwrap(), "rl:gcra/v2:3:api");
    }

    #[test]
    fn a_trial_keeps_its_state_apart_from_the_enforced_policy() {
        let prefix = |policy: Policy| String::from_utf8(key_prefix("rl", &policy, "api")).unwrap();
        let window = Policy::fixed_window("5/1s").unwrap().with_dry_run(true);
        assert_eq!(prefix(window), "rl:fixed_window/v3/trial:3:api");
        let sliding = Policy::sliding_window("5/1s", "100ms").unwrap().with_dry_run(true);
        assert_eq!(prefix(sliding), "rl:sliding_window/v3/trial:3:api");
        assert_eq!(prefix(Policy::concurrency(2, "30s").unwrap().with_dry_run(true)), "rl:concurrency/v1/trial:3:api");
    }

    /// An operator's prefix holding a limiter's layout could spell the key of
    /// another limiter under a shorter prefix.
    #[cfg(feature = "redis")]
    #[test]
    fn a_prefix_cannot_pose_as_a_layout_name_and_key() {
        let policy = Policy::fixed_window("5/1s").unwrap();
        let layout = super::layout(&policy);
        let full = |prefix: &str, name, key: &str| storage_key(&key_prefix(prefix, &policy, name), key.as_bytes());
        let short = full("app", "n", &format!("x:{layout}:1:m:y"));
        let long = full(&format!("app:{layout}:1:n:x"), "m", "y");
        assert_ne!(short, long);
        assert_eq!(long, format!("app%3A{layout}%3A1%3An%3Ax:{layout}:1:m:y").into_bytes());
        assert_ne!(full("a%3Ab", "n", "k"), full("a:b", "n", "k"));
        assert_eq!(full("redlimit", "n", "k"), format!("redlimit:{layout}:1:n:k").into_bytes());
    }

    #[cfg(feature = "redis")]
    #[test]
    fn a_long_key_is_stored_by_its_digest() {
        assert_eq!(&*storage_key(b"p", b"k"), b"p:k");
        let long = vec![b'x'; super::MAX_RAW_KEY_LEN + 1];
        assert_eq!(&*storage_key(b"p", &long), format!("p#{}", sha1_smol::Sha1::from(&long).digest()).as_bytes());
    }

    /// The integer path must write what the `Display` path writes, or a
    /// function's keys would change with the way its argument is declared.
    #[test]
    fn integers_are_written_as_display_writes_them() {
        fn both<T: super::KeyInteger + std::fmt::Display>(value: T) {
            let (mut fast, mut display) = (String::from("k:"), String::from("k:"));
            push_key_integer(&mut fast, &value);
            push_key_value(&mut display, &value);
            assert_eq!(fast, display, "{value}");
        }
        for n in [0u64, 1, 9, 10, 99, 100, 12_345, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            both(n);
        }
        for n in [0i64, -1, 1, -10, i64::MIN, i64::MAX, i64::MIN + 1] {
            both(n);
        }
        both(u8::MAX);
        both(i8::MIN);
        both(i16::MIN);
        both(i32::MIN);
        both(usize::MAX);
        both(isize::MIN);
        #[allow(clippy::needless_borrows_for_generic_args)] // the impls for references are what this checks
        both(&&7u16);
    }
}
