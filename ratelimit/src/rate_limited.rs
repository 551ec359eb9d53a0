//! [`RateLimited`] (the error a denied call returns), its [`Key`] and [`DenialReason`].

use crate::decision::Decision;
use crate::policy::Policy;
use redlimit_grammar::quote;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The error a denied call returns: which limiter, which key, why
/// ([`DenialReason`]) and the [`Decision`].
///
/// `Display` names the rule that denied and when to retry; it never prints the
/// key, which is user data ([`Key`]'s own `Display` shows it escaped). The
/// wait is always in seconds, rounded up to the millisecond (so obeying it
/// succeeds) and written with no more decimals than it needs: `60s`,
/// `1.5s`, `0.25s`, `9.966s`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{DenialReason, Limiter, ManualClock, Policy, Store};
/// use std::time::Duration;
///
/// let store = Store::memory().with_clock(ManualClock::new());
/// let limiter = Limiter::new("login", Policy::sliding_log("1/1m")?, &store);
/// limiter.limit("bob", 1).await.unwrap();
/// let denied = limiter.limit("bob", 1).await.unwrap_err();
/// assert_eq!(denied.to_string(), "rate limited by `login` (1/1m exceeded); retry after 60s");
/// assert_eq!(denied.reason(), DenialReason::Limited);
/// assert_eq!((denied.limiter(), denied.key().to_str()), ("login", Some("bob")));
/// assert_eq!(denied.policy().map(ToString::to_string).as_deref(), Some("sliding_log 1/1m"));
/// assert_eq!((denied.decision().limit, denied.decision().remaining), (1, 0));
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
/// # Ok(()) }
/// ```
///
/// One word: what it says is boxed, so a user's `Result<_, RateLimited>`
/// (or an error enum holding one) stays small.
#[derive(Debug, Clone)]
pub struct RateLimited(pub(crate) Box<Denial>);

/// What a denial says.
#[derive(Debug, Clone)]
pub(crate) struct Denial {
    limiter: Arc<str>,
    key: Key,
    /// `None` exactly when the reason is [`DenialReason::PolicyNotConfigured`].
    policy: Option<Policy>,
    decision: Decision,
    reason: DenialReason,
    /// The limiter's name was made up by `#[rate_limit]` (module path and
    /// function), so what a client is shown leaves it out.
    pub(crate) named_by_default: bool,
    /// How to make a call [`DenialReason::Misused`] refused.
    misuse: Option<Box<str>>,
}

/// Why a call was denied.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{DenialReason, Limiter, OnError, Policy, Store};
///
/// let limiter = Limiter::new("api", Policy::gcra("1/1s", 0)?, &Store::memory()).with_on_error(OnError::Deny);
/// limiter.limit("k", 1).await.unwrap();
/// assert_eq!(limiter.limit("k", 1).await.unwrap_err().reason(), DenialReason::Limited);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DenialReason {
    /// The policy's limit: the store counted and found no room.
    Limited,
    /// The store could not answer and `on_error = "deny"` denied the call.
    StoreUnavailable,
    /// The call names a configured policy that does not exist (yet) and
    /// `on_error = "deny"` denied the call.
    PolicyNotConfigured,
    /// The call was made in a way no store can decide
    /// ([`Error::Misuse`](crate::Error::Misuse): `limit` or `wait` on a
    /// concurrency limiter, whose permits only
    /// [`Limiter::acquire`](crate::Limiter::acquire) holds; a call that
    /// missed its test's scope): refused whatever `on_error` or a dry run
    /// says, and its `Display` says how to make it.
    Misused,
}

impl RateLimited {
    /// A denial by `policy`'s limit, as the store decided.
    pub(crate) fn limited(limiter: Arc<str>, key: &[u8], policy: Policy, decision: Decision) -> RateLimited {
        RateLimited::new(limiter, key, Some(policy), decision, DenialReason::Limited)
    }

    /// A call `on_error = "deny"` denied because the store could not answer.
    pub(crate) fn store_unavailable(limiter: Arc<str>, key: &[u8], policy: Policy, decision: Decision) -> RateLimited {
        RateLimited::new(limiter, key, Some(policy), decision, DenialReason::StoreUnavailable)
    }

    /// A call made wrongly, refused: see [`DenialReason::Misused`].
    pub(crate) fn misused(
        limiter: Arc<str>,
        key: &[u8],
        policy: Policy,
        decision: Decision,
        why: String,
    ) -> RateLimited {
        let mut denied = RateLimited::new(limiter, key, Some(policy), decision, DenialReason::Misused);
        denied.0.misuse = Some(why.into());
        denied
    }

    /// A call `on_error = "deny"` denied because its named policy is not configured.
    pub(crate) fn policy_not_configured(limiter: Arc<str>, key: &[u8], decision: Decision) -> RateLimited {
        RateLimited::new(limiter, key, None, decision, DenialReason::PolicyNotConfigured)
    }

    fn new(
        limiter: Arc<str>,
        key: &[u8],
        policy: Option<Policy>,
        decision: Decision,
        reason: DenialReason,
    ) -> RateLimited {
        RateLimited(Box::new(Denial {
            limiter,
            key: Key::new(key),
            policy,
            decision,
            reason,
            named_by_default: false,
            misuse: None,
        }))
    }

    /// Marks the limiter's name as made up by `#[rate_limit]`: a client is not shown it.
    pub(crate) fn named_by_default(mut self) -> RateLimited {
        self.0.named_by_default = true;
        self
    }

    /// Why the call was denied.
    pub fn reason(&self) -> DenialReason {
        self.0.reason
    }

    /// The limiter's name.
    pub fn limiter(&self) -> &str {
        &self.0.limiter
    }

    /// The key the call was counted under, byte for byte.
    pub fn key(&self) -> &Key {
        &self.0.key
    }

    /// The limiter's policy (its `Display` reads `sliding_log 10/1s,100/1m`);
    /// `None` when the call named a configured policy that does not exist.
    pub fn policy(&self) -> Option<&Policy> {
        self.0.policy.as_ref()
    }

    /// The full decision. When the limiter could not decide (any reason but
    /// [`DenialReason::Limited`]) no store state was read: `remaining` is 0
    /// and `retry_after` is `None`.
    pub fn decision(&self) -> &Decision {
        &self.0.decision
    }

    /// When the same call would pass, if ever.
    pub fn retry_after(&self) -> Option<Duration> {
        self.0.decision.retry_after
    }

    /// The denial in words; the limiter's name only when `named`.
    fn describe(&self, f: &mut impl fmt::Write, named: bool) -> fmt::Result {
        if let Some(why) = &self.0.misuse {
            return match named {
                true => write!(f, "`{}` refused the call: {why}", quote(&*self.0.limiter)),
                false => write!(f, "the call was refused: {why}"),
            };
        }
        match named {
            true => write!(f, "rate limited by `{}`", quote(&*self.0.limiter))?,
            false => write!(f, "rate limited")?,
        }
        let policy = match (self.0.reason, self.0.policy.as_ref()) {
            (DenialReason::Limited, Some(policy)) => policy,
            (DenialReason::StoreUnavailable, _) => return write!(f, ": the rate limit store is unavailable"),
            _ => return write!(f, ": its named policy is not configured"),
        };
        write!(f, " (")?;
        if self.0.decision.violated.is_empty() {
            write!(f, "{policy}")?;
        } else {
            for (i, s) in self.0.decision.violated.iter().enumerate() {
                write!(f, "{}{s}", if i > 0 { ", " } else { "" })?;
            }
            write!(f, " exceeded")?;
        }
        match self.0.decision.retry_after {
            Some(wait) => write!(f, "); retry after {}", format_wait(wait)),
            None => write!(f, "); this cost can never pass: it exceeds what the policy admits"),
        }
    }
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe(f, true)
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
/// assert_eq!(denied.key().as_bytes(), b"k\xff\n");
/// assert_eq!(denied.key().to_string(), r"k\xff\n");
/// assert_eq!(denied.key().to_str(), None, "not UTF-8");
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

/// `60s`, `1.5s`, `0.25s`: seconds, rounded up to the millisecond so
/// obeying it succeeds, one unit for every wait so texts compare at a glance.
fn format_wait(wait: Duration) -> String {
    let ms = wait.as_nanos().div_ceil(1_000_000);
    let (secs, fraction) = (ms / 1000, ms % 1000);
    if fraction == 0 {
        return format!("{secs}s");
    }
    let decimals = format!("{fraction:03}");
    format!("{secs}.{}s", decimals.trim_end_matches('0'))
}

impl std::error::Error for RateLimited {}

#[cfg(test)]
mod tests {
    use super::format_wait;
    use std::time::Duration;

    #[test]
    fn waits_are_seconds_rounded_up_to_the_millisecond() {
        assert_eq!(format_wait(Duration::from_micros(999_977)), "1s");
        assert_eq!(format_wait(Duration::from_micros(999_000)), "0.999s");
        assert_eq!(format_wait(Duration::from_nanos(1)), "0.001s");
        assert_eq!(format_wait(Duration::from_micros(1)), "0.001s");
        assert_eq!(format_wait(Duration::from_millis(250)), "0.25s");
        assert_eq!(format_wait(Duration::from_millis(9_966)), "9.966s");
        assert_eq!(format_wait(Duration::from_micros(1_500_001)), "1.501s");
        assert_eq!(format_wait(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(format_wait(Duration::from_millis(10_050)), "10.05s");
        assert_eq!(format_wait(Duration::from_secs(60)), "60s");
        assert_eq!(format_wait(Duration::ZERO), "0s");
        assert_eq!(format_wait(Duration::MAX), "18446744073709551616s");
    }
}
