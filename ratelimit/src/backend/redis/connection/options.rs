//! [`RedisOptions`]: the Redis connection's timeouts and retry settings.

use crate::error::Error;
use std::time::Duration;

/// Timeouts and retry settings of the Redis connection. Every default is set
/// here explicitly rather than inherited from redis-rs.
///
/// Built from [`RedisOptions::default`] with the `with_*` setters (new
/// settings may be added, so it cannot be written as a struct literal); the
/// fields can be read.
///
/// Each duration is from 1 ms to 1 hour ([`RedisOptions::MAX_DURATION`]),
/// `retry_interval` at most a minute ([`RedisOptions::MAX_RETRY_INTERVAL`])
/// and `reconnect_retries` at most [`RedisOptions::MAX_RECONNECT_RETRIES`]:
/// [`Store::redis_with`](crate::Store::redis_with) rejects anything else
/// with an [`Error::InvalidConfig`] naming the field, rather than
/// overflowing or turning a safeguard off.
///
/// ```
/// use redlimit::RedisOptions;
/// use std::time::Duration;
///
/// let options = RedisOptions::default().with_response_timeout(Duration::from_millis(100)).with_reconnect_retries(5);
/// assert_eq!(options.response_timeout, Duration::from_millis(100));
/// assert_eq!((options.connect_timeout, options.reconnect_retries), (Duration::from_secs(1), 5));
/// assert!(options.validate().is_ok());
///
/// let forever = RedisOptions::default().with_retry_interval(Duration::MAX);
/// let error = forever.validate().unwrap_err().to_string();
/// assert!(error.contains("retry_interval"), "{error}");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct RedisOptions {
    /// Bound on establishing a connection (default 1 s): the whole of
    /// [`Store::redis`](crate::Store::redis), retries of a refused connect
    /// included, and of each reconnect attempt. Start-up fails with a clear
    /// error after this, instead of hanging.
    pub connect_timeout: Duration,
    /// Bound on one decision's round trip (default 250 ms), a wait for a
    /// reconnect or a script reload included. A call that takes longer is an
    /// [`Error::Timeout`]; it may still have run on the server, so it is
    /// never counted as a permit.
    pub response_timeout: Duration,
    /// Reconnect attempts after the connection drops (default 3, backing
    /// off from 50 ms); calls wait for them within their response timeout.
    pub reconnect_retries: usize,
    /// After a failure to reach Redis, calls fail at once with
    /// [`Error::Unavailable`] for this long (default 250 ms) instead of each
    /// waiting out a timeout; then the next call tries Redis again. At most
    /// [`MAX_RETRY_INTERVAL`](Self::MAX_RETRY_INTERVAL): calls keep failing
    /// for all of it even once Redis is back.
    pub retry_interval: Duration,
    /// Calls of one limiter that wait at the same time go to Redis as one
    /// script call that decides them one after another, in arrival order,
    /// each as it would have been decided alone (default on). A lone call is
    /// sent at once, never held back for company; calls queue only while a
    /// few of that limiter's script calls are already in flight, so under
    /// load Redis pays its per-call cost once per batch. Off: every call is
    /// its own `EVALSHA`.
    pub batching: bool,
    /// Replicas that must have a script call's writes before it is
    /// answered (default 0: none asked). Each script call, a single call's
    /// or a whole batch's, is sent with `WAIT replica_acks
    /// replica_ack_timeout` in the same round trip; a call fewer replicas
    /// acknowledged in time is an [`Error::Server`] that `on_error`
    /// settles (it may have been counted), never an answer, so what was
    /// answered survives a failover to one of those replicas. Set with
    /// [`with_replica_acks`](Self::with_replica_acks); see the failures
    /// guide for the server settings that go with it.
    pub replica_acks: usize,
    /// How long the master waits for [`replica_acks`](Self::replica_acks)
    /// replicas (default 100 ms): from 1 ms to less than `response_timeout`,
    /// which bounds the call, the wait included.
    pub replica_ack_timeout: Duration,
    /// PEM certificate(s) of a private certificate authority to trust for
    /// the Redis nodes of `rediss://`, `rediss+cluster://` and
    /// `rediss+sentinel://` (default: none, the system's roots). Sentinels
    /// themselves are reached over plain TCP.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub tls_root_cert: Option<Vec<u8>>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_millis(250),
            reconnect_retries: 3,
            retry_interval: Duration::from_millis(250),
            batching: true,
            replica_acks: 0,
            replica_ack_timeout: Duration::from_millis(100),
            #[cfg(feature = "tls")]
            tls_root_cert: None,
        }
    }
}

impl RedisOptions {
    /// The longest duration any field takes.
    pub const MAX_DURATION: Duration = Duration::from_secs(3600);
    /// The shortest duration any field takes.
    pub const MIN_DURATION: Duration = Duration::from_millis(1);
    /// The longest [`retry_interval`](Self::retry_interval): one failure
    /// fails every call for that long, even after Redis is back, so a longer
    /// one would turn a blip into an outage.
    ///
    /// ```
    /// use redlimit::RedisOptions;
    /// use std::time::Duration;
    ///
    /// assert_eq!(RedisOptions::MAX_RETRY_INTERVAL, Duration::from_secs(60));
    /// let options = RedisOptions::default().with_retry_interval(RedisOptions::MAX_RETRY_INTERVAL);
    /// assert!(options.validate().is_ok());
    /// let error = options.with_retry_interval(Duration::from_secs(3600)).validate().unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "invalid RedisOptions: `retry_interval` is 3600s; it must be from 1ms to 60s \
    ///      (after a failure every call fails at once for that long, even once Redis is back)"
    /// );
    /// ```
    pub const MAX_RETRY_INTERVAL: Duration = Duration::from_secs(60);
    /// The most reconnect attempts `reconnect_retries` takes.
    pub const MAX_RECONNECT_RETRIES: usize = 100;
    /// The most replicas [`replica_acks`](Self::replica_acks) asks for.
    pub const MAX_REPLICA_ACKS: usize = 100;

    /// Sets [`connect_timeout`](Self::connect_timeout).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`response_timeout`](Self::response_timeout).
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets [`reconnect_retries`](Self::reconnect_retries).
    pub fn with_reconnect_retries(mut self, retries: usize) -> Self {
        self.reconnect_retries = retries;
        self
    }

    /// Sets [`retry_interval`](Self::retry_interval).
    pub fn with_retry_interval(mut self, interval: Duration) -> Self {
        self.retry_interval = interval;
        self
    }

    /// Sets [`batching`](Self::batching): `false` sends every call as its own `EVALSHA`.
    pub fn with_batching(mut self, batching: bool) -> Self {
        self.batching = batching;
        self
    }

    /// Sets [`replica_acks`](Self::replica_acks) and
    /// [`replica_ack_timeout`](Self::replica_ack_timeout): each call is
    /// answered only once `replicas` replicas have its writes, or fails
    /// after `timeout`. `0` asks none.
    ///
    /// ```
    /// use redlimit::RedisOptions;
    /// use std::time::Duration;
    ///
    /// let options = RedisOptions::default().with_replica_acks(1, Duration::from_millis(50));
    /// assert!(options.validate().is_ok());
    /// // The wait must end before the call's response timeout does.
    /// let error = options.with_replica_acks(1, Duration::from_millis(250)).validate().unwrap_err();
    /// assert!(error.to_string().contains("replica_ack_timeout"), "{error}");
    /// ```
    pub fn with_replica_acks(mut self, replicas: usize, timeout: Duration) -> Self {
        self.replica_acks = replicas;
        self.replica_ack_timeout = timeout;
        self
    }

    /// Sets [`tls_root_cert`](Self::tls_root_cert): PEM certificate(s) to
    /// trust for `rediss://` nodes.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn with_tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_cert = Some(pem.into());
        self
    }

    /// `Ok` when every field is within its bounds; else an
    /// [`Error::InvalidConfig`] naming the first field that is not.
    pub fn validate(&self) -> Result<(), Error> {
        let retry_why = " (after a failure every call fails at once for that long, even once Redis is back)";
        let durations = [
            ("connect_timeout", self.connect_timeout, Self::MAX_DURATION, ""),
            ("response_timeout", self.response_timeout, Self::MAX_DURATION, ""),
            ("retry_interval", self.retry_interval, Self::MAX_RETRY_INTERVAL, retry_why),
        ];
        for (field, value, max, why) in durations {
            if !(Self::MIN_DURATION..=max).contains(&value) {
                return Err(Error::InvalidConfig(format!(
                    "invalid RedisOptions: `{field}` is {value:?}; it must be from {:?} to {max:?}{why}",
                    Self::MIN_DURATION,
                )));
            }
        }
        if self.reconnect_retries > Self::MAX_RECONNECT_RETRIES {
            return Err(Error::InvalidConfig(format!(
                "invalid RedisOptions: `reconnect_retries` is {}; it must be at most {}",
                self.reconnect_retries,
                Self::MAX_RECONNECT_RETRIES
            )));
        }
        if self.replica_acks > Self::MAX_REPLICA_ACKS {
            return Err(Error::InvalidConfig(format!(
                "invalid RedisOptions: `replica_acks` is {}; it must be at most {}",
                self.replica_acks,
                Self::MAX_REPLICA_ACKS
            )));
        }
        // A zero `WAIT` timeout waits forever; one as long as the call's own
        // bound would time every unacknowledged call out instead of saying why.
        let ack_bounds = Self::MIN_DURATION..self.response_timeout;
        if self.replica_acks > 0 && !ack_bounds.contains(&self.replica_ack_timeout) {
            return Err(Error::InvalidConfig(format!(
                "invalid RedisOptions: `replica_ack_timeout` is {:?}; it must be from {:?} to less than \
                 `response_timeout` ({:?}), which bounds the call and its wait for the replicas",
                self.replica_ack_timeout,
                Self::MIN_DURATION,
                self.response_timeout
            )));
        }
        Ok(())
    }
}
