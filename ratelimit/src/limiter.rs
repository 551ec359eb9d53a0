//! [`Limiter`]: a name, a policy and a store.

use crate::backend::memory::{Call, KeyPrefix};
use crate::backend::{MemoryBackend, Outcome, Request};
use crate::deny_cache::DenyCache;
use crate::key::StorageKey;
use crate::observe::{self, LimiterMetrics};
use crate::{Decision, Error, OnError, Policy, RateLimited, Store};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::Instrument;

/// Asks a store that answers through a future (Redis) and times its
/// answer; the caller settles the outcome. A macro, not an `async fn`, so
/// that each caller awaits the store's own future: a call builds and polls
/// no future of its own around it (an `async fn` measurably did).
macro_rules! ask_store {
    ($limiter:expr, $storage_key:expr, $cost:expr, $peek:expr, $now_us:expr) => {{
        let started = $limiter.store_started();
        // The request is built in the call, so the future does not keep a copy.
        let outcome = $limiter
            .inner
            .store
            .backend
            .decide(Request {
                key: $storage_key,
                policy: &$limiter.inner.policy,
                cost: $cost,
                now_us: $now_us,
                peek: $peek,
            })
            .await;
        $limiter.store_answered(started);
        outcome
    }};
}

/// A named policy on a store. Cheap to clone; clones share everything.
///
/// Two limiters with the same name, algorithm and store share their counts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ratelimit::Error> {
/// use ratelimit::{Limiter, ManualClock, Policy, Store};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let store = Store::memory().with_clock(clock.clone());
/// let limiter = Limiter::new("uploads", Policy::token_bucket(10, "1/3s")?, &store);
///
/// assert_eq!(limiter.check("alice", 10).await?.remaining, 0);
/// let denied = limiter.check("alice", 1).await?;
/// assert_eq!(denied.retry_after, Some(Duration::from_secs(3)));
/// clock.advance(Duration::from_secs(3));
/// assert!(limiter.check("alice", 1).await?.allowed);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
    on_error: OnError,
    /// Denials remembered until their `retry_after` (`None`: turned off).
    deny_cache: Option<Arc<DenyCache>>,
}

struct Inner {
    name: Arc<str>,
    policy: Policy,
    store: Store,
    key_prefix: Vec<u8>,
    /// `key_prefix` and `:` hashed by the store, when it is in this process.
    memory_prefix: Option<KeyPrefix>,
    /// Decides while the store cannot, under `OnError::Local`.
    local: MemoryBackend,
    store_errors: AtomicU64,
    /// Registered with the recorder present at the first decision.
    metrics: OnceLock<LimiterMetrics>,
    /// The store is remote (its answer time is a metric worth recording).
    remote: bool,
}

impl Limiter {
    /// A limiter named `name` applying `policy` on `store`.
    pub fn new(name: impl Into<Arc<str>>, policy: Policy, store: &Store) -> Limiter {
        let name = name.into();
        let remote = store.backend.kind() != "memory";
        let key_prefix =
            crate::key::key_prefix(&store.prefix, &policy, &name, remote && store.clock.now_us().is_none());
        let memory_prefix =
            store.backend.as_memory().map(|memory| memory.key_prefix(&[&key_prefix[..], b":"].concat()));
        Limiter {
            inner: Arc::new(Inner {
                name,
                policy,
                store: store.clone(),
                key_prefix,
                memory_prefix,
                local: MemoryBackend::new(),
                store_errors: AtomicU64::new(0),
                metrics: OnceLock::new(),
                remote,
            }),
            on_error: OnError::default(),
            deny_cache: Some(Arc::new(DenyCache::new())),
        }
    }

    /// Turns the deny cache on (the default) or off.
    ///
    /// With it on, a denial that names a `retry_after` is remembered in this
    /// process until then: a check of the same key and cost meanwhile is
    /// answered at once with that decision (its `retry_after` and
    /// `reset_after` counted down, `remaining` and `violated` as the store
    /// gave them), without asking the store. It only ever denies, and only
    /// until the time the store named, so it never admits more than the
    /// policy allows; a [`reset`](Self::reset) through this limiter forgets
    /// the key. Turn it off when something else may reset or raise a key's
    /// limit while it is denied (another process's `reset`) and calls must
    /// see that at once, or to have every check reach the store.
    ///
    /// A store in this process ([`Store::memory`]) is always asked: it
    /// decides as fast as the cache would answer, and a denial there takes
    /// nothing, so its answer is the one the cache would have given.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ratelimit::Error> {
    /// use ratelimit::{Limiter, ManualClock, Policy, Store};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let store = Store::memory().with_clock(clock.clone());
    /// let limiter = Limiter::new("api", Policy::gcra("1/1s", 0)?, &store);
    /// limiter.check("k", 1).await?;
    /// assert!(!limiter.check("k", 1).await?.allowed); // on Redis: remembered
    /// clock.advance(Duration::from_millis(400));
    /// let later = limiter.check("k", 1).await?; // on Redis: answered in process
    /// assert_eq!(later.retry_after, Some(Duration::from_millis(600)));
    ///
    /// let uncached = Limiter::new("api", Policy::gcra("1/1s", 0)?, &store).with_deny_cache(false);
    /// assert_eq!(uncached.check("k", 1).await?, later); // the store's own answer: the same
    /// # Ok(()) }
    /// ```
    pub fn with_deny_cache(mut self, on: bool) -> Limiter {
        self.deny_cache = match (on, self.deny_cache) {
            (true, Some(cache)) => Some(cache),
            (true, None) => Some(Arc::new(DenyCache::new())),
            (false, _) => None,
        };
        self
    }

    /// Sets what [`limit`](Self::limit) does when the store cannot answer.
    pub fn with_on_error(mut self, on_error: OnError) -> Limiter {
        self.on_error = on_error;
        self
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// How many calls found the store unable to answer.
    pub fn store_errors(&self) -> u64 {
        self.inner.store_errors.load(Ordering::Relaxed)
    }

    /// Takes `cost` permits for `key` if every rule allows it.
    ///
    /// A denial is `Ok` with `allowed == false`; `Err` means the store could
    /// not decide (see [`limit`](Self::limit) for a call that applies
    /// [`OnError`] instead).
    ///
    /// As with an `async fn`, nothing happens until the future is awaited;
    /// it is written as a function returning the decision's future only so
    /// the future holds the key once (a smaller future is cheaper to move).
    pub fn check<K: AsRef<[u8]>>(
        &self,
        key: K,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + use<'_, K> {
        self.observed(key, cost, false)
    }

    /// The answer [`check`](Self::check) would give, without taking anything.
    pub fn peek<K: AsRef<[u8]>>(
        &self,
        key: K,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + use<'_, K> {
        self.observed(key, cost, true)
    }

    /// Forgets `key`: its next call sees a fresh state.
    pub async fn reset(&self, key: impl AsRef<[u8]>) -> Result<(), Error> {
        let storage_key = self.storage_key(key.as_ref());
        let result = self.inner.store.backend.reset(&storage_key).await;
        if let Some(cache) = &self.deny_cache {
            cache.forget(key.as_ref());
        }
        result
    }

    /// Like [`check`](Self::check), but a denial is an `Err(RateLimited)` and a
    /// store failure is settled by the limiter's [`OnError`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ratelimit::Error> {
    /// use ratelimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("search", Policy::gcra("1/1s", 0)?, &store);
    /// assert!(limiter.limit("carol", 1).await.is_ok());
    /// let denied = limiter.limit("carol", 1).await.unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(std::time::Duration::from_secs(1)));
    /// # Ok(()) }
    /// ```
    pub async fn limit(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<Decision, RateLimited> {
        let key = key.as_ref();
        let decision = match self.observed(key, cost, false).await {
            Ok(decision) => decision,
            Err(error) => self.on_store_error(key, cost, &error)?,
        };
        if decision.allowed {
            Ok(decision)
        } else {
            Err(self.denial(key, decision, false))
        }
    }

    /// Like [`limit`](Self::limit), but a denial that can pass later sleeps
    /// until `retry_after` and tries again, for at most `max_wait` in total
    /// (`None`: no bound). This is how a leaky bucket shapes traffic.
    pub async fn wait(
        &self,
        key: impl AsRef<[u8]>,
        cost: u64,
        max_wait: Option<Duration>,
    ) -> Result<Decision, RateLimited> {
        let key = key.as_ref();
        let mut waited = Duration::ZERO;
        loop {
            match self.limit(key, cost).await {
                Err(denied) => match denied.retry_after() {
                    Some(wait) if max_wait.is_none_or(|max| waited + wait <= max) => {
                        tokio::time::sleep(wait).await;
                        waited += wait;
                    }
                    _ => return Err(denied),
                },
                allowed => return allowed,
            }
        }
    }

    fn storage_key(&self, key: &[u8]) -> StorageKey {
        crate::key::storage_key(&self.inner.key_prefix, key)
    }

    /// One decision, counted in the metrics and, when some subscriber takes
    /// DEBUG events, run in its tracing span.
    async fn observed<K: AsRef<[u8]>>(&self, key: K, cost: u64, peek: bool) -> Result<Decision, Error> {
        let key = key.as_ref();
        if observe::decision_span_wanted() {
            // Boxed, so the future of every call stays small: only a program
            // that takes DEBUG events pays for the span and the allocation.
            return Box::pin(self.in_span(key, cost, peek)).await;
        }
        // The memory store decides here and builds the decision itself, so
        // it is not copied through an `Option` on its way to this future's
        // output (each copy of its 120 bytes cost about 15 instructions).
        if let Some((prefix, memory)) = self.memory_by_parts(key) {
            let decision = self.decide_in_memory(memory, prefix, key, cost, peek);
            self.count_decision(&decision, peek);
            return Ok(decision);
        }
        // Another store in this process answers here, without polling another future.
        // (`begin_elsewhere`'s answer is gone before the await: it is not kept in the future.)
        let (storage_key, now_us, local_now_us) = match self.begin_elsewhere(key, cost, peek) {
            Begun::Decided(decision) => {
                self.count_decision(&decision, peek);
                return Ok(decision);
            }
            Begun::AskStore { storage_key, now_us, local_now_us } => (storage_key, now_us, local_now_us),
        };
        let outcome = ask_store!(self, &storage_key, cost, peek, now_us);
        drop(storage_key);
        let result = outcome.map(|outcome| self.settle(key, cost, peek, local_now_us, outcome));
        self.count(&result, peek);
        result
    }

    /// [`limit`](Self::limit) for a caller that only needs to know whether
    /// the call goes ahead (annotated functions): the same decision, metrics,
    /// tracing, deny cache and [`OnError`], but a remote store's admission
    /// is not turned into a [`Decision`] nobody reads, and a denial is boxed, so
    /// the `Result` every call moves through the futures is two words.
    pub(crate) async fn pass(&self, key: &[u8], cost: u64) -> Result<(), Box<RateLimited>> {
        match self.pass_at_once(key, cost) {
            Ok(decided) => decided,
            Err(clocked) => self.pass_clocked(key, cost, clocked).await,
        }
    }

    /// [`pass`](Self::pass) without a future, when it can be decided here:
    /// by the memory store (deciding by parts), or by a denial the deny
    /// cache remembers. Else `Err` with the times read for the call, for
    /// [`pass_clocked`](Self::pass_clocked). Never decides while a tracing
    /// span is wanted, so every decision gets its span.
    ///
    /// A caller that tries this first builds no future for such a call: on
    /// the memory store, copying the future into the caller's took a fifth
    /// of an annotated call's time, and a flooding client's denials went
    /// half as fast as through [`check`](Self::check) (issue 6). The memory
    /// store's answer is the same `Decision` as `check`'s: a second way into
    /// the store made the compiler move the key's hash out of line in both,
    /// which cost `check` 75 instructions.
    #[inline]
    pub(crate) fn pass_at_once(&self, key: &[u8], cost: u64) -> Result<Result<(), Box<RateLimited>>, Clocked> {
        if observe::decision_span_wanted() {
            return Err(Clocked::Unread);
        }
        if let Some((prefix, memory)) = self.memory_by_parts(key) {
            let decision = self.decide_in_memory(memory, prefix, key, cost, false);
            self.count_decision(&decision, false);
            return Ok(self.passed(key, decision));
        }
        match self.remembered(key, cost, false) {
            Ok(decision) => {
                self.count_decision(&decision, false);
                Ok(self.passed(key, decision))
            }
            Err((now_us, local_now_us)) => Err(Clocked::Read { now_us, local_now_us }),
        }
    }

    /// The rest of [`pass`](Self::pass), after [`pass_at_once`](Self::pass_at_once).
    pub(crate) async fn pass_clocked(&self, key: &[u8], cost: u64, clocked: Clocked) -> Result<(), Box<RateLimited>> {
        let Clocked::Read { now_us, local_now_us } = clocked else {
            // Boxed, as in `observed`: only a program taking DEBUG events pays.
            return Box::pin(self.limit(key, cost)).await.map(drop).map_err(Box::new);
        };
        let storage_key = match self.begin_clocked(key, cost, false, now_us, local_now_us) {
            Begun::Decided(decision) => {
                self.count_decision(&decision, false);
                return self.passed(key, decision);
            }
            Begun::AskStore { storage_key, .. } => storage_key,
        };
        let outcome = ask_store!(self, &storage_key, cost, false, now_us);
        drop(storage_key);
        match outcome {
            Ok(outcome) if outcome.allowed => {
                // What `settle` and `count` do with an admission.
                if let Some(cache) = self.deny_cache(cost, false) {
                    cache.forget(key);
                }
                self.metrics().decided(true);
                Ok(())
            }
            outcome => self.refused(key, cost, local_now_us, outcome),
        }
    }

    /// The rest of [`pass`](Self::pass): a denial, or a store failure settled by [`OnError`].
    #[cold]
    fn refused(
        &self,
        key: &[u8],
        cost: u64,
        local_now_us: u64,
        outcome: Result<Outcome, Error>,
    ) -> Result<(), Box<RateLimited>> {
        let result = outcome.map(|outcome| self.settle(key, cost, false, local_now_us, outcome));
        self.count(&result, false);
        let decision = match result {
            Ok(decision) => decision,
            Err(error) => self.on_store_error(key, cost, &error).map_err(Box::new)?,
        };
        self.passed(key, decision)
    }

    /// `Ok` for an admitted call, else its denial.
    fn passed(&self, key: &[u8], decision: Decision) -> Result<(), Box<RateLimited>> {
        if decision.allowed {
            Ok(())
        } else {
            Err(Box::new(self.denial(key, decision, false)))
        }
    }

    /// [`run`](Self::run) in its tracing span, counted in the metrics.
    async fn in_span(&self, key: &[u8], cost: u64, peek: bool) -> Result<Decision, Error> {
        let span = observe::decision_span(&self.inner.name, self.inner.policy.algorithm().name(), cost);
        let result = if span.is_disabled() {
            self.run(key, cost, peek).await
        } else {
            self.run(key, cost, peek).instrument(span.clone()).await
        };
        observe::record(&span, &result);
        self.count(&result, peek);
        result
    }

    /// Counts a decision (not a peek's) or a store failure in the metrics.
    fn count(&self, result: &Result<Decision, Error>, peek: bool) {
        match result {
            Ok(decision) => self.count_decision(decision, peek),
            Err(error) => observe::store_error(error),
        }
    }

    /// Counts a decision, unless it answered a peek.
    #[inline]
    fn count_decision(&self, decision: &Decision, peek: bool) {
        if !peek {
            self.metrics().decided(decision.allowed);
        }
    }

    fn metrics(&self) -> &LimiterMetrics {
        self.inner
            .metrics
            .get_or_init(|| LimiterMetrics::register(&self.inner.name, self.inner.policy.algorithm().name()))
    }

    async fn run(&self, key: &[u8], cost: u64, peek: bool) -> Result<Decision, Error> {
        match self.begin(key, cost, peek) {
            Begun::Decided(decision) => Ok(decision),
            Begun::AskStore { storage_key, now_us, local_now_us } => {
                let outcome = ask_store!(self, &storage_key, cost, peek, now_us)?;
                Ok(self.settle(key, cost, peek, local_now_us, outcome))
            }
        }
    }

    /// Everything a call does before it may have to wait: read the clock,
    /// look in the deny cache, and let a store in this process decide.
    #[inline]
    fn begin(&self, key: &[u8], cost: u64, peek: bool) -> Begun {
        match self.memory_by_parts(key) {
            Some((prefix, memory)) => Begun::Decided(self.decide_in_memory(memory, prefix, key, cost, peek)),
            None => self.begin_elsewhere(key, cost, peek),
        }
    }

    /// [`begin`](Self::begin) for a call the memory store does not decide by parts.
    #[inline]
    fn begin_elsewhere(&self, key: &[u8], cost: u64, peek: bool) -> Begun {
        match self.remembered(key, cost, peek) {
            Ok(decision) => Begun::Decided(decision),
            Err((now_us, local_now_us)) => self.begin_clocked(key, cost, peek, now_us, local_now_us),
        }
    }

    /// Reads the call's time and looks for a denial the deny cache
    /// remembers for it (not a peek, not cost 0); `Err` with the times
    /// read: the limiter's clock's (`None`: the store's own), and this process's.
    #[inline]
    fn remembered(&self, key: &[u8], cost: u64, peek: bool) -> Result<Decision, (Option<u64>, u64)> {
        let now_us = self.inner.store.clock.now_us();
        // The time of this call here: it dates a remembered denial and is the
        // clock of a store in this process, so one read serves both.
        let local_now_us = now_us.unwrap_or_else(crate::clock::process_now_us);
        self.deny_cache(cost, peek).and_then(|cache| cache.get(key, cost, local_now_us)).ok_or((now_us, local_now_us))
    }

    /// [`begin_elsewhere`](Self::begin_elsewhere) once the deny cache had no answer.
    #[inline]
    fn begin_clocked(&self, key: &[u8], cost: u64, peek: bool, now_us: Option<u64>, local_now_us: u64) -> Begun {
        // Any other store gets the full key, built once: a store that
        // answers at once takes it here, and a remote one in `ask_store!`.
        let storage_key = self.storage_key(key);
        let request = Request { key: &storage_key, policy: &self.inner.policy, cost, now_us, peek };
        match self.inner.store.backend.decide_at_once(&request, local_now_us) {
            Some(outcome) => Begun::Decided(self.settle(key, cost, peek, local_now_us, outcome)),
            None => Begun::AskStore { storage_key, now_us, local_now_us },
        }
    }

    /// When a remote store is asked: the start of the time it took.
    #[inline]
    fn store_started(&self) -> Option<u64> {
        self.inner.remote.then(crate::clock::process_ns)
    }

    /// Records how long a remote store took to answer.
    #[inline]
    fn store_answered(&self, started: Option<u64>) {
        if let Some(started) = started {
            self.metrics().store_took(Duration::from_nanos(crate::clock::process_ns().saturating_sub(started)));
        }
    }

    /// The deny cache, if it takes part in this call (not a peek, not cost 0,
    /// and the store is not in this process: that one decides as fast as the
    /// cache would answer, and with the same answer).
    #[inline]
    fn deny_cache(&self, cost: u64, peek: bool) -> Option<&DenyCache> {
        self.deny_cache.as_deref().filter(|_| !peek && cost > 0 && self.inner.memory_prefix.is_none())
    }

    /// The store's outcome as a [`Decision`], kept in or cleared from the deny cache.
    #[inline]
    fn settle(&self, key: &[u8], cost: u64, peek: bool, local_now_us: u64, outcome: Outcome) -> Decision {
        let decision = self.decision(outcome);
        if let Some(cache) = self.deny_cache(cost, peek) {
            if decision.allowed {
                // A smaller cost got through and changed the state: a denial
                // remembered for a larger one may now name too early a time.
                cache.forget(key);
            } else {
                cache.remember(key, cost, local_now_us, &decision);
            }
        }
        decision
    }

    /// The memory store and the limiter's hashed prefix, when that store
    /// decides `key` by parts (no key built): all but a long key (stored by
    /// its digest, through [`begin_elsewhere`](Self::begin_elsewhere)).
    /// `None` for any other store, found before the clock is read. The deny
    /// cache takes no part (see [`deny_cache`](Self::deny_cache)).
    #[inline(always)]
    fn memory_by_parts(&self, key: &[u8]) -> Option<(&KeyPrefix, &MemoryBackend)> {
        let (Some(prefix), Some(memory)) = (&self.inner.memory_prefix, self.inner.store.backend.as_memory()) else {
            return None;
        };
        (key.len() <= crate::key::MAX_RAW_KEY_LEN).then_some((prefix, memory))
    }

    /// The memory store's decision for the limiter's `prefix` and the user's `key`.
    #[inline(always)]
    fn decide_in_memory(
        &self,
        memory: &MemoryBackend,
        prefix: &KeyPrefix,
        key: &[u8],
        cost: u64,
        peek: bool,
    ) -> Decision {
        let (call, local_now_us) = self.memory_call(cost, peek);
        memory.decide_parts(prefix, key, call, local_now_us)
    }

    /// A call's parameters for the memory store, and this process's time
    /// (the store's clock when the limiter's gives none).
    #[inline(always)]
    fn memory_call(&self, cost: u64, peek: bool) -> (Call<'_>, u64) {
        let now_us = self.inner.store.clock.now_us();
        (Call { policy: &self.inner.policy, cost, now_us, peek }, now_us.unwrap_or_else(crate::clock::process_now_us))
    }

    #[inline(always)]
    fn decision(&self, outcome: Outcome) -> Decision {
        Decision::from_outcome(outcome, &self.inner.policy)
    }

    fn denial(&self, key: &[u8], decision: Decision, store_unavailable: bool) -> RateLimited {
        RateLimited {
            limiter: self.inner.name.clone(),
            key: String::from_utf8_lossy(key).into_owned(),
            policy: Some(self.inner.policy.clone()),
            decision,
            store_unavailable,
        }
    }

    /// This process's idea of now, for decisions the store did not make.
    fn local_now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.inner.store.clock.now_us().unwrap_or_else(crate::clock::system_now_us))
    }

    /// Settles a call the store could not decide; a timed-out call may have
    /// been counted by the store, so it is never treated as a permit taken.
    #[allow(clippy::result_large_err)] // the same Result as `limit`, which returns it as is
    fn on_store_error(&self, key: &[u8], cost: u64, error: &Error) -> Result<Decision, RateLimited> {
        self.inner.store_errors.fetch_add(1, Ordering::Relaxed);
        let kind = observe::error_kind(error);
        let limit = self.inner.policy.max_cost();
        match self.on_error {
            OnError::Allow => {
                tracing::warn!(target: "ratelimit", limiter = %self.inner.name, kind, %error, "rate limit store unavailable; call allowed (on_error = allow)");
                self.metrics().decided(true);
                Ok(Decision {
                    allowed: true,
                    limit,
                    remaining: 0,
                    reset_after: Duration::ZERO,
                    retry_after: None,
                    violated: Vec::new(),
                    decided_at: self.local_now(),
                    quotas: Vec::new(),
                })
            }
            OnError::Deny => {
                tracing::warn!(target: "ratelimit", limiter = %self.inner.name, kind, %error, "rate limit store unavailable; call denied (on_error = deny)");
                self.metrics().decided(false);
                let decision = Decision {
                    allowed: false,
                    limit,
                    remaining: 0,
                    reset_after: Duration::ZERO,
                    retry_after: None,
                    violated: Vec::new(),
                    decided_at: self.local_now(),
                    quotas: Vec::new(),
                };
                Err(self.denial(key, decision, true))
            }
            OnError::Local => {
                let storage_key = self.storage_key(key);
                let request = Request {
                    key: &storage_key,
                    policy: &self.inner.policy,
                    cost,
                    now_us: self.inner.store.clock.now_us(),
                    peek: false,
                };
                let decision = self.decision(self.inner.local.decide_now(&request));
                let verdict = if decision.allowed { "call allowed" } else { "call denied" };
                tracing::warn!(target: "ratelimit", limiter = %self.inner.name, kind, %error, "rate limit store unavailable; {verdict} by the in-memory limiter (on_error = local)");
                self.metrics().decided(decision.allowed);
                Ok(decision)
            }
        }
    }
}

/// What [`Limiter::pass_at_once`] leaves for [`Limiter::pass_clocked`]
/// when it did not decide. Not a public API (the macro's `Site` holds it).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Clocked {
    /// The times read for the call: the limiter's clock's (`None`: the
    /// store's own), and this process's.
    Read { now_us: Option<u64>, local_now_us: u64 },
    /// A tracing span is wanted: the call is decided in it, from the start.
    Unread,
}

/// How far [`Limiter::begin`] got without waiting.
enum Begun {
    Decided(Decision),
    /// The store answers through a future; the key to ask for, and the
    /// times read for this call.
    AskStore {
        storage_key: StorageKey,
        now_us: Option<u64>,
        local_now_us: u64,
    },
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.inner.name)
            .field("policy", &self.inner.policy.to_string())
            .field("store", &self.inner.store)
            .finish()
    }
}
