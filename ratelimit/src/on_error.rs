//! [`OnError`]: what a call does when the store cannot answer.

/// What [`Limiter::limit`](crate::Limiter::limit) (and every annotated
/// function) does when the store times out or cannot be reached.
///
/// Whatever the choice, the failure is counted
/// ([`Limiter::store_errors`](crate::Limiter::store_errors)) and logged at WARN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Let the call through (fail open), as Envoy and most peers do.
    #[default]
    Allow,
    /// Deny the call; the denial says the store was unavailable.
    Deny,
    /// Decide on an in-process limiter with the same policy until the store
    /// answers again.
    Local,
}
