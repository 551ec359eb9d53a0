//! What a redis-rs error means for this crate: an [`Error`] classified by
//! what happened, its text kept, its type hidden behind `source()`.

use crate::error::{Error, Failure};
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// What happened, as far as a caller can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Connection,
    Auth,
    Server,
    Protocol,
    Config,
}

fn class(error: &RedisError) -> Class {
    match error.kind() {
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm) => Class::Auth,
        // Redis's own codes for a missing or wrong password, which redis-rs does not name.
        ErrorKind::Extension if matches!(error.code(), Some("NOAUTH" | "WRONGPASS")) => Class::Auth,
        ErrorKind::Io
        | ErrorKind::ClusterConnectionNotFound
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::NoValidReplicasFoundBySentinel => Class::Connection,
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType | ErrorKind::RESP3NotSupported => Class::Protocol,
        ErrorKind::InvalidClientConfig | ErrorKind::EmptySentinelList => Class::Config,
        _ if error.is_connection_dropped() || error.is_connection_refusal() || error.is_timeout() => Class::Connection,
        _ => Class::Server,
    }
}

/// A call's failure (a decision, a script load, a reset).
pub(crate) fn from_redis(error: RedisError) -> Error {
    match class(&error) {
        Class::Connection => Error::Connection(Failure::caused_by(format!("cannot reach Redis: {error}"), error)),
        Class::Auth => Error::Auth(Failure::caused_by(format!("Redis refused the credentials: {error}"), error)),
        Class::Server => Error::Server(Failure::caused_by(format!("Redis answered with an error: {error}"), error)),
        Class::Protocol => Error::Protocol(error.to_string()),
        Class::Config => Error::InvalidConfig(format!("Redis client configuration: {error}")),
    }
}

/// A failure to connect to `url` (already redacted): every message starts
/// with "cannot connect to Redis at" and the URL.
pub(crate) fn connect_failed(url: &str, error: RedisError) -> Error {
    let class = class(&error);
    let message = match class {
        Class::Auth => format!("cannot connect to Redis at {url}: the credentials were refused ({error})"),
        // What answered does not speak Redis's protocol: a wrong port, most likely.
        Class::Protocol => format!("cannot connect to Redis at {url}: the reply was not Redis's ({error})"),
        _ => format!("cannot connect to Redis at {url}: {error}"),
    };
    match class {
        Class::Auth => Error::Auth(Failure::caused_by(message, error)),
        Class::Server => Error::Server(Failure::caused_by(message, error)),
        Class::Config => Error::InvalidConfig(message),
        Class::Connection | Class::Protocol => Error::Connection(Failure::caused_by(message, error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_is_what_it_is() {
        let io = |kind| RedisError::from(std::io::Error::from(kind));
        for kind in
            [std::io::ErrorKind::ConnectionRefused, std::io::ErrorKind::ConnectionReset, std::io::ErrorKind::BrokenPipe]
        {
            let error = from_redis(io(kind));
            assert!(matches!(error, Error::Connection(_)) && error.is_unavailable(), "{error:?}");
        }
        let wrong = RedisError::from((ErrorKind::AuthenticationFailed, "Password authentication failed"));
        assert!(matches!(from_redis(wrong), Error::Auth(_)));
        let script = RedisError::from((ErrorKind::Client, "script error"));
        let error = from_redis(script);
        assert!(matches!(error, Error::Server(_)) && !error.is_unavailable(), "{error:?}");
        assert_eq!(error.to_string(), "Redis answered with an error: script error - Client");
        assert!(std::error::Error::source(&error).is_some_and(|s| s.to_string() == "script error - Client"));
    }
}
