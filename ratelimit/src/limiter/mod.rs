//! [`Limiter`]: a name, a policy bound to a store, and what a caller sees
//! of its decisions. Every call decides through the one pipeline
//! (`pipeline.rs`); `enforcement.rs` turns a decision into what the caller
//! sees (`limit`, `wait`, and every admitted call).

pub(crate) mod deny_cache;
pub(crate) mod dry_run;
pub(crate) mod enforcement;
pub(crate) mod on_error;
pub(crate) mod outage_log;
pub(crate) mod pipeline;
pub(crate) mod priority;
pub(crate) mod refund;
pub(crate) mod settle;

use crate::backend::memory::MemoryBound;
use crate::backend::{Binding, Bound, MemoryBackend, Unavailable};
use crate::call::{Call, CallKind};
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::deny_cache::DenyCache;
use crate::limiter::enforcement::Enforcement;
use crate::limiter::on_error::OnError;
use crate::limiter::outage_log::OutageLog;
use crate::limiter::refund::RefundLog;
use crate::observe::{LimiterMetrics, PermitMetrics};
use crate::policy::Policy;
use crate::store::Store;
use once_cell::sync::OnceCell;
use redlimit_grammar::AlgorithmKind;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A named policy on a store. Cheap to clone; clones share everything.
///
/// Two limiters with the same name, algorithm and store share their counts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::{Limiter, ManualClock, Policy, Store};
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
    pub(crate) inner: Arc<Inner>,
    /// The policy this limiter decides by, bound to its store.
    pub(crate) rule: Arc<Rule>,
    /// What a caller sees of its decisions: on_error, dry run, refunds.
    pub(crate) enforcement: Enforcement,
    /// Denials remembered until their `retry_after` (`None`: turned off).
    pub(crate) deny_cache: Option<Arc<DenyCache>>,
    /// Local quotas of hot keys ([`Limiter::with_prefetch`]).
    pub(crate) prefetch: Option<Arc<crate::prefetch::Prefetch>>,
    /// The class `rule` decides as ([`Limiter::with_priority`]).
    pub(crate) priority: crate::policy::Priority,
    /// Every class's rule, under a policy with headroom (`priority.rs`).
    pub(crate) classes: Option<Arc<priority::Classes>>,
}

/// What every clone of a limiter shares, whatever policy it decides by
/// ([`Limiter::with_policy`]).
pub(crate) struct Inner {
    pub(crate) name: Arc<str>,
    pub(crate) store: Store,
    /// Decides while the store cannot, under `OnError::Local`; made on first need.
    pub(crate) local: OnceCell<MemoryBackend>,
    pub(crate) store_errors: AtomicU64,
    /// When this limiter's store failures are worth a log line.
    pub(crate) outage: OutageLog,
    /// Per algorithm, registered with the recorder present at its first decision.
    pub(crate) metrics: [OnceCell<LimiterMetrics>; AlgorithmKind::ALL.len()],
    /// A dry run's first let-through was logged.
    pub(crate) dry_run_reported: AtomicBool,
    /// The first call made wrongly ([`Error::Misuse`]) was logged.
    pub(crate) misuse_reported: AtomicBool,
    /// Wakes this process's waiting acquisitions when a permit is given back.
    pub(crate) released: tokio::sync::Notify,
    /// Concurrency permits held, registered at the first.
    pub(crate) permit_metrics: OnceCell<PermitMetrics>,
    /// The refunds of admitted calls (`refund_on`) that could not be made.
    pub(crate) refunds: RefundLog,
}

/// A policy bound to a limiter's store: made once per policy, used by every call under it.
pub(crate) struct Rule {
    pub(crate) policy: Policy,
    pub(crate) bound: Arc<dyn Bound>,
    /// The store is in another process ([`Bound::remote`]), asked once.
    pub(crate) remote: bool,
    /// Bound in dry run (the policy's or the limiter's): a trial keeps its
    /// own state, so it never spends the enforced policy's count.
    pub(crate) trial: bool,
    /// Tells the deny cache's denials under this policy from those under
    /// another (and a trial's from the enforced policy's); worked out when
    /// first needed (a cache that holds a denial).
    fingerprint: OnceCell<u64>,
    /// This policy bound as a trial, for the limiter put in dry run; made
    /// once, since a site or layer in dry run asks for it on every call.
    as_trial: OnceCell<Arc<Rule>>,
}

impl Rule {
    /// `policy` bound on `inner`'s store; a trial when `trial` or the policy is in dry run.
    fn new(inner: &Inner, policy: Policy, trial: bool) -> Rule {
        let store = &inner.store;
        let trial = trial || policy.is_dry_run();
        let bound = store.backend.bind(Binding {
            prefix: &store.prefix,
            name: &inner.name,
            policy: &bound_as(&policy, trial),
            server_clock: store.clock.now_us().is_none(),
        });
        Rule { fingerprint: OnceCell::new(), policy, remote: bound.remote(), trial, bound, as_trial: OnceCell::new() }
    }

    pub(crate) fn fingerprint(&self) -> u64 {
        *self.fingerprint.get_or_init(|| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (self.policy.fingerprint(), self.trial).hash(&mut hasher);
            hasher.finish()
        })
    }

    /// This rule's policy as a trial: itself when it is one.
    fn trial(self: &Arc<Rule>, inner: &Inner) -> Arc<Rule> {
        match self.trial {
            true => self.clone(),
            false => self.as_trial.get_or_init(|| Arc::new(Rule::new(inner, self.policy.clone(), true))).clone(),
        }
    }
}

/// The policy a store binds: marked dry run for a trial, which the key
/// layout reads (`key.rs`), so a trial's keys are its own on every store.
fn bound_as(policy: &Policy, trial: bool) -> std::borrow::Cow<'_, Policy> {
    match trial && !policy.is_dry_run() {
        true => std::borrow::Cow::Owned(policy.clone().with_dry_run(true)),
        false => std::borrow::Cow::Borrowed(policy),
    }
}

impl Limiter {
    /// A limiter named `name` applying `policy` on `store`.
    pub fn new(name: impl Into<Arc<str>>, policy: Policy, store: &Store) -> Limiter {
        let inner = Inner {
            name: name.into(),
            store: store.clone(),
            local: OnceCell::new(),
            store_errors: AtomicU64::new(0),
            outage: OutageLog::default(),
            metrics: Default::default(),
            dry_run_reported: AtomicBool::new(false),
            misuse_reported: AtomicBool::new(false),
            released: tokio::sync::Notify::new(),
            permit_metrics: OnceCell::new(),
            refunds: RefundLog::new(),
        };
        let rule = Arc::new(Rule::new(&inner, policy, false));
        Limiter {
            inner: Arc::new(inner),
            rule,
            enforcement: Enforcement::DEFAULT,
            deny_cache: Some(Arc::new(DenyCache::new())),
            prefetch: None,
            priority: crate::policy::Priority::default(),
            classes: None,
        }
        .classed()
    }

    /// This limiter deciding by `policy` instead of its own: the same name,
    /// store, keys, deny cache, metrics and `on_error`, so a policy can be
    /// chosen per call (a customer's quota read from a database, a plan
    /// changed at run time). The store needs nothing per policy: it loads no
    /// script and keeps nothing for it, however many distinct policies are used.
    ///
    /// A key keeps its state across policies of the same algorithm: a user
    /// moved from 2 to 5 calls a minute keeps what they used in the current
    /// window. A policy of another algorithm keeps its own state under the
    /// same key (README, "Limits as data", says what carries over), and so
    /// does a policy in dry run, or any policy of a limiter in dry run: a
    /// trial never spends the enforced count ([`with_dry_run`](Self::with_dry_run)).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let limiter = Limiter::new("api", Policy::fixed_window("2/1m")?, &store);
    /// let (free, paid) = (Policy::fixed_window("2/1m")?, Policy::fixed_window("5/1m")?);
    ///
    /// limiter.with_policy(&free).check("alice", 2).await?;
    /// assert!(!limiter.with_policy(&free).check("alice", 1).await?.allowed);
    /// let upgraded = limiter.with_policy(&paid).check("alice", 1).await?;
    /// assert_eq!((upgraded.allowed, upgraded.limit, upgraded.remaining), (true, 5, 2));
    /// # Ok(()) }
    /// ```
    pub fn with_policy(&self, policy: &Policy) -> Limiter {
        self.clone().unclassed().with_whole_policy(policy).classed()
    }

    /// [`with_policy`](Self::with_policy) of a limiter deciding by its whole policy.
    fn with_whole_policy(self, policy: &Policy) -> Limiter {
        let trial = self.enforcement.dry_run || policy.is_dry_run();
        let same = *policy == self.rule.policy
            && policy.name() == self.rule.policy.name()
            && policy.is_dry_run() == self.rule.policy.is_dry_run()
            && trial == self.rule.trial;
        let rule = match same {
            true => self.rule.clone(),
            false => Arc::new(Rule::new(&self.inner, policy.clone(), trial)),
        };
        Limiter { rule, ..self }
    }

    /// A limiter of `policy` on a store that could not be built: every call
    /// fails with `error`, so `on_error` settles it as any store failure.
    pub(crate) fn unavailable(name: &str, policy: &Policy, error: Error, on_error: OnError) -> Limiter {
        let store = Store::from_backend(Arc::new(Unavailable(error)));
        Limiter::new(name, policy.clone(), &store).with_on_error(on_error)
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
    /// the key, and a Redis found restarted or flushed (by this process's
    /// next call to reach it) forgets them all ([what is
    /// covered](crate::guide::failures#what-redis-forgets-is-not-counted)). Turn it off when something else may reset or raise a key's
    /// limit while it is denied (another process's `reset`) and calls must
    /// see that at once, or to have every check reach the store.
    ///
    /// A store in this process ([`Store::memory`]) is always asked: it
    /// decides as fast as the cache would answer, and a denial there takes
    /// nothing, so its answer is the one the cache would have given.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
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

    /// Puts this limiter in dry run (shadow mode), or takes it out: calls
    /// are decided and recorded as usual (`check` and `peek` still answer
    /// as the store does), but [`limit`](Self::limit), [`wait`](Self::wait)
    /// and everything built on them (annotated functions, layers) let
    /// through a call they would deny, `on_error = Deny` included: the
    /// decision says `allowed: false`, the call is counted in
    /// `redlimit_dry_run_denials_total` and logged. A policy or the whole
    /// process can be in dry run too ([`Policy::with_dry_run`],
    /// [`set_dry_run`](crate::set_dry_run)).
    ///
    /// A limiter or policy in dry run is a trial: it counts what it would
    /// have admitted in a state of its own (keys of its own, on every
    /// store), so beside the enforced limiter of the same name and key it
    /// spends none of that limiter's count, and its reports say what it
    /// alone would have done. Taken out of dry run, the limiter enforces
    /// the enforced state, which the trial never touched. (The process's
    /// switch is not a trial: it lets the enforced policies' denials
    /// through on their own counts.)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let store = Store::memory().with_clock(ManualClock::new());
    /// let enforced = Limiter::new("api", Policy::gcra("2/1m", 1)?, &store);
    /// let trial = Limiter::new("api", Policy::gcra("1/1m", 0)?, &store).with_dry_run(true);
    /// assert!(trial.limit("ann", 1).await.unwrap().allowed);
    /// let passed = trial.limit("ann", 1).await.expect("never denied");
    /// assert_eq!((passed.allowed, passed.retry_after), (false, Some(std::time::Duration::from_secs(60))));
    /// assert_eq!(enforced.check("ann", 1).await?.remaining, 1, "the trial took none of its permits");
    /// # Ok(()) }
    /// ```
    pub fn with_dry_run(self, on: bool) -> Limiter {
        self.unclassed().with_whole_dry_run(on).classed()
    }

    /// [`with_dry_run`](Self::with_dry_run) of a limiter deciding by its whole policy.
    fn with_whole_dry_run(mut self, on: bool) -> Limiter {
        self.enforcement.dry_run = on;
        self.rule = match (on, self.rule.trial) {
            (true, false) => self.rule.trial(&self.inner),
            // Out of dry run: enforced again, unless its policy is a trial itself.
            (false, true) if !self.rule.policy.is_dry_run() => {
                Arc::new(Rule::new(&self.inner, self.rule.policy.clone(), false))
            }
            _ => self.rule,
        };
        self
    }

    /// Whether a call this limiter would deny passes: it, its policy or the
    /// process is in dry run.
    pub fn is_dry_run(&self) -> bool {
        self.rule.trial || crate::limiter::dry_run::is_dry_run()
    }

    /// Sets what [`limit`](Self::limit) does when the store cannot answer.
    pub fn with_on_error(mut self, on_error: OnError) -> Limiter {
        self.enforcement.on_error = on_error;
        self
    }

    /// This limiter enforcing as `enforcement` says (an annotated function's
    /// or a layer's settings): its dry run, `on_error`, what a denial does
    /// when admitted, and whether admitted calls keep what they took.
    pub(crate) fn enforcing(self, enforcement: Enforcement) -> Limiter {
        let limiter = self.with_dry_run(enforcement.dry_run);
        Limiter { enforcement, ..limiter }
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The policy this limiter decides by: under a policy with headroom,
    /// its class's share of it ([`Policy::for_priority`], [`with_priority`](Self::with_priority)).
    pub fn policy(&self) -> &Policy {
        &self.rule.policy
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
    /// A concurrency policy's permits are held, not spent, and `check`
    /// would hold none: on a concurrency limiter it is an
    /// `Err(Error::Misuse)` naming [`acquire`](Self::acquire), which
    /// holds them (and [`limit`](Self::limit) and [`wait`](Self::wait) an
    /// `Err` whose reason is [`DenialReason::Misused`](crate::DenialReason::Misused),
    /// whatever `on_error` or dry run says); [`peek`](Self::peek) still says
    /// how many are free.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{DenialReason, Limiter, Policy, Store};
    ///
    /// let exports = Limiter::new("exports", Policy::concurrency(2, "30s")?, &Store::memory());
    /// assert!(exports.check("tenant", 1).await.unwrap_err().to_string().contains("`Limiter::acquire`"));
    /// assert_eq!(exports.limit("tenant", 1).await.unwrap_err().reason(), DenialReason::Misused);
    /// let held = exports.acquire("tenant").await.unwrap();
    /// let free = exports.peek("tenant", 1).await?;
    /// assert_eq!((free.allowed, free.remaining), (true, 0), "one of two is free");
    /// # drop(held); Ok(()) }
    /// ```
    ///
    /// Like an `async fn`, the future does nothing until it is polled.
    pub fn check<'a>(
        &'a self,
        key: impl AsRef<[u8]> + 'a,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + 'a {
        self.decide(key, cost, CallKind::Check)
    }

    /// The answer [`check`](Self::check) would give, without taking anything.
    /// On a concurrency limiter: whether `cost` permits are free now.
    pub fn peek<'a>(
        &'a self,
        key: impl AsRef<[u8]> + 'a,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + 'a {
        self.decide(key, cost, CallKind::Peek)
    }

    /// Forgets `key`: its next call sees a fresh state (and, under
    /// prefetch, takes nothing this process held of it before). Only the
    /// state this limiter's policy decides by: an enforced limiter's reset
    /// leaves a trial's count of the key alone, and a trial's the enforced one.
    pub async fn reset(&self, key: impl AsRef<[u8]>) -> Result<(), Error> {
        let key = key.as_ref();
        if let Some(prefetch) = &self.prefetch {
            prefetch.forget(self, key);
        }
        let result = self.rule.bound.reset(key).await;
        if let Some(cache) = &self.deny_cache {
            cache.forget(key);
        }
        result
    }

    /// `call` decided by this limiter's policy on an in-process store of
    /// its own, at the store's clock's time (`OnError::Local`, and the
    /// permits it holds).
    pub(crate) fn decide_locally(&self, call: Call<'_>) -> Decision {
        let inner = &self.inner;
        let policy = bound_as(&self.rule.policy, self.rule.trial);
        let binding = Binding { prefix: &inner.store.prefix, name: &inner.name, policy: &policy, server_clock: true };
        let local: MemoryBound = inner.local.get_or_init(MemoryBackend::new).bind_memory(binding);
        local.decide_now(call, inner.store.clock.now_us()).into_decision(&self.rule.policy)
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.inner.name)
            .field("policy", &self.rule.policy.to_string())
            .field("store", &self.inner.store)
            .finish()
    }
}
