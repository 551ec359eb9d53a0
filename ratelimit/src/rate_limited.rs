//! [`RateLimited`] (the error a denied call returns) and its [`Key`].

use crate::{Decision, Policy};
use redlimit_grammar::quote;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The error a denied call returns: which limiter, which key, and the [`Decision`].
///
/// `Display` names the rule that denied and when to retry; it never prints the
/// key, which is user data ([`Key`]'s own `Display` shows it escaped).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, ManualClock, Policy, Store};
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("login", Policy::sliding_log("1/1m")?, &store);
/// limiter.limit("bob", 1).await.unwrap();
/// let denied = limiter.limit("bob", 1).await.unwrap_err();
/// assert_eq!(denied.to_string(), "rate limited by `login` (1/1m exceeded); retry after 60s");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RateLimited {
    /// The limiter's name.
    pub limiter: Arc<str>,
    /// The key the call was counted under, byte for byte.
    pub key: Key,
    /// The policy that denied (its `Display` reads `sliding_log 10/1s,100/1m`);
    /// `None` when the call named a configured policy that does not exist.
    pub policy: Option<Policy>,
    /// The full decision.
    pub decision: Decision,
    /// Set when the limiter could not decide (the store could not answer, or
    /// the named policy is not configured) and `on_error = "deny"` denied the call.
    pub store_unavailable: bool,
}

impl RateLimited {
    /// When the same call would pass, if ever.
    pub fn retry_after(&self) -> Option<Duration> {
        self.decision.retry_after
    }
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(policy) = self.policy.as_ref() else {
            return write!(f, "rate limited by `{}`: its named policy is not configured", quote(&*self.limiter));
        };
        if self.store_unavailable {
            return write!(f, "rate limited by `{}`: the rate limit store is unavailable", quote(&*self.limiter));
        }
        write!(f, "rate limited by `{}` (", quote(&*self.limiter))?;
        if self.decision.violated.is_empty() {
            write!(f, "{policy}")?;
        } else {
            for (i, s) in self.decision.violated.iter().enumerate() {
                write!(f, "{}{s}", if i > 0 { ", " } else { "" })?;
            }
            write!(f, " exceeded")?;
        }
        match self.decision.retry_after {
            Some(wait) => write!(f, "); retry after {}", format_wait(wait)),
            None => write!(f, "); this cost can never pass: it exceeds what the policy admits"),
        }
    }
}

/// The key of a denied call: its bytes as the limiter received them, any
/// bytes at all (a header's value need not be UTF-8).
///
/// `Display` escapes it for a log or a message: a backslash, a control or
/// other unprintable character as Rust writes it (`\\`, `\n`, `\u{1b}`), a
/// byte that is not UTF-8 as `\xNN`, and a key over
/// [`MAX_QUOTED`](redlimit_grammar::MAX_QUOTED) bytes cut there, with its
/// length. [`as_bytes`](Key::as_bytes) has every byte.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, Policy, Store};
///
/// let limiter = Limiter::new("api", Policy::fixed_window("1/1m")?, &Store::memory());
/// limiter.limit(b"k\xff\n", 1).await.unwrap();
/// let denied = limiter.limit(b"k\xff\n", 1).await.unwrap_err();
/// assert_eq!(denied.key.as_bytes(), b"k\xff\n");
/// assert_eq!(denied.key.to_string(), r"k\xff\n");
/// assert_eq!(denied.key.to_str(), None, "not UTF-8");
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key(Box<[u8]>);

impl Key {
    pub(crate) fn new(bytes: &[u8]) -> Key {
        Key(bytes.into())
    }

    /// Every byte of the key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The key as text, when it is UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&quote(&self.0), f)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(\"{self}\")")
    }
}

impl PartialEq<[u8]> for Key {
    fn eq(&self, other: &[u8]) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other.as_bytes()
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == *other.as_bytes()
    }
}

impl PartialEq<String> for Key {
    fn eq(&self, other: &String) -> bool {
        *self.0 == *other.as_bytes()
    }
}

/// `1.5s`, `60s`, `250ms`: short, and rounded up so obeying it succeeds.
fn format_wait(wait: Duration) -> String {
    let ms = wait.as_micros().div_ceil(1000);
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{:.3}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

impl std::error::Error for RateLimited {}

#[cfg(test)]
mod tests {
    use super::format_wait;
    use std::time::Duration;

    #[test]
    fn waits_read_short_and_round_up() {
        assert_eq!(format_wait(Duration::from_micros(999_977)), "1s");
        assert_eq!(format_wait(Duration::from_micros(1)), "1ms");
        assert_eq!(format_wait(Duration::from_millis(250)), "250ms");
        assert_eq!(format_wait(Duration::from_micros(1_500_001)), "1.501s");
        assert_eq!(format_wait(Duration::from_secs(60)), "60s");
    }
}
