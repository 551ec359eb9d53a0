//! [`Site`]: one annotated function's limiter, and the calls its generated
//! code makes. Not a public API: it changes with the macro, which is pinned
//! to this crate.

pub(crate) mod macro_support;
pub(crate) mod priority;

use crate::backend::BoxFuture;
use crate::call::Call;
use crate::decision::Decision;
use crate::global::lazy::LazyLimiter;
use crate::limiter::enforcement::{Enforcement, OnLimit};
use crate::limiter::on_error::OnError;
use crate::limiter::pipeline::Progress;
use crate::limiter::Limiter;
use crate::permit::{Permit, Ticket};
use crate::policy::Policy;
use crate::rate_limited::RateLimited;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{ready, Context, Poll};

/// One annotated function's limiter, built on its first call on the global store.
#[derive(Debug)]
pub struct Site {
    limiter: LazyLimiter,
    named_by_default: bool,
}

impl Site {
    /// A site; `policy` comes from a constant the macro validated at compile time.
    pub const fn new(name: &'static str, policy: Policy, on_limit: OnLimit, on_error: OnError) -> Site {
        let limiter = LazyLimiter::fixed(Cow::Borrowed(name), policy, enforcement(on_limit, on_error));
        Site { limiter, named_by_default: false }
    }

    /// A site whose policy is the one named `policy` in the configured set
    /// (`#[rate_limit(policy = "search")]`), followed across reloads.
    pub const fn configured(name: &'static str, policy: &'static str, on_limit: OnLimit, on_error: OnError) -> Site {
        let limiter = LazyLimiter::named(Cow::Borrowed(name), Cow::Borrowed(policy), enforcement(on_limit, on_error));
        Site { limiter, named_by_default: false }
    }

    /// A site whose every call gives its policy
    /// (`#[rate_limit(policy = plan_policy(&user))]`): see [`call`](Self::call).
    pub const fn per_call(name: &'static str, on_limit: OnLimit, on_error: OnError) -> Site {
        let limiter = LazyLimiter::per_call(Cow::Borrowed(name), enforcement(on_limit, on_error));
        Site { limiter, named_by_default: false }
    }

    /// Puts the site in dry run (`dry_run = true`): its calls are decided
    /// and recorded, and one that would be denied runs the body anyway
    /// ([`Limiter::with_dry_run`](crate::Limiter::with_dry_run)).
    pub const fn dry_run(mut self) -> Site {
        self.limiter.enforcement.dry_run = true;
        self
    }

    /// Keeps what each call took, so it can be given back
    /// ([`refund_if`](Self::refund_if), [`refund`](Self::refund)): its
    /// body's failure (`refund_on = "err"`), or a denial by a site stacked
    /// after it (the body it paid for never runs).
    pub const fn refunds(mut self) -> Site {
        self.limiter.enforcement.refunds = true;
        self
    }

    /// Takes up to `k` permits per store call for a hot key (`prefetch = k`,
    /// [`Limiter::with_prefetch`](crate::Limiter::with_prefetch)); ignored
    /// under a named or per-call policy of an algorithm that cannot prefetch.
    pub const fn prefetch(mut self, k: u64) -> Site {
        self.limiter.prefetch.max = k;
        self
    }

    /// Marks the name as made up by the macro (module path + function name).
    /// Methods of two types in one module get the same such name and so
    /// share a limit; the first call of the second one warns about it.
    pub const fn named_by_default(mut self) -> Site {
        self.named_by_default = true;
        self
    }

    /// Decides one call of the function, by `policy` when the call gives
    /// one (a [`per_call`](Self::per_call) site: the site's limiter is
    /// built once, and each call decides by its own policy through
    /// [`Limiter::with_policy`](crate::limiter::Limiter::with_policy), so a
    /// key's count carries over when its policy changes within an algorithm).
    ///
    /// `Ok(ticket)` runs the body, which holds the ticket until it ends (a
    /// concurrency policy's lease is given back then; under `refund_on` it
    /// gives back what the call took); `Err` is the denial to return (or to
    /// call the fallback with). Under `OnLimit::Wait` it sleeps until the
    /// call passes or the maximum wait would be exceeded. When the global
    /// store cannot be built, or a named policy is not configured, the
    /// site's `on_error` decides (never a panic). The admitted decision is
    /// shown to the decision's observer (the HTTP layer's fields).
    ///
    /// The denial is boxed: every call moves this `Result`, and a box is one word.
    pub fn call<'a>(&'static self, policy: Option<&'a Policy>, call: Call<'a>) -> SiteCall<'a> {
        SiteCall { site: self, policy, call, state: SiteState::Start, progress: Progress::default(), priority: None }
    }

    /// [`call`](Self::call) on a limiter it must look up, build or own
    /// (in a scope, a policy given per call or configured by name).
    async fn call_owned(
        &'static self,
        policy: Option<&Policy>,
        call: Call<'_>,
        class: Option<crate::policy::Priority>,
    ) -> Result<Ticket, Box<RateLimited>> {
        // Boxed: only a call that builds or looks up the limiter waits for it.
        let current = match self.limiter.ready(policy) {
            Some(ready) => ready,
            None => Box::pin(self.limiter.current_ref(policy)).await,
        };
        let limiter = match current {
            Ok((limiter, first)) => {
                if first && self.named_by_default {
                    self.warn_if_default_name_shared();
                }
                match class {
                    Some(class) => Cow::Owned(limiter.with_priority(class)),
                    None => limiter,
                }
            }
            Err(why) => {
                // Settled without I/O: spend the task's budget as I/O would, so a loop of such calls yields.
                tokio::task::coop::consume_budget().await;
                let on_error = self.limiter.enforcement.on_error;
                return match self.limiter.settle_unconfigured(on_error, "call", &why, call.key) {
                    Ok(()) => Ok(Ticket::default()),
                    Err(denied) => Err(self.denial(denied)),
                };
            }
        };
        let admitted = limiter.admit(call, limiter.enforcement.on_limit).await;
        self.ticket(&limiter, admitted)
    }

    /// What an admission gives the body: its ticket, the decision shown to
    /// the observer; or the denial, boxed.
    #[inline]
    fn ticket(&self, limiter: &Limiter, admitted: Result<Permit, RateLimited>) -> Result<Ticket, Box<RateLimited>> {
        match admitted {
            Ok(permit) => {
                let (decision, ticket) = permit.into_parts();
                observe_admitted(limiter, &decision);
                Ok(ticket)
            }
            Err(denied) => Err(self.denial(denied)),
        }
    }

    /// A denial of this site's, boxed; a name the macro made up is marked,
    /// so a client is not shown the module path.
    fn denial(&self, denied: RateLimited) -> Box<RateLimited> {
        Box::new(if self.named_by_default { denied.named_by_default() } else { denied })
    }

    /// [`call`](Self::call)'s answer for a function that has no way to
    /// return a denial: `on_limit = "wait"` with no maximum, a literal cost
    /// the policy admits and `on_error` other than `"deny"`. The macro only
    /// emits it when those hold, so every denial is waited out; should one
    /// still come back, the call goes ahead (fail open) with a warning, and
    /// took nothing.
    pub fn let_through(&self, decided: Result<Ticket, Box<RateLimited>>) -> Ticket {
        decided.unwrap_or_else(|denied| {
            tracing::warn!(target: "redlimit", limiter = self.limiter.name(), %denied, "denial could not be waited out; call allowed");
            Ticket::default()
        })
    }

    /// Gives back what `ticket`'s call took when `failed`: its body returned
    /// `Err(..)` (`refund_on = "err"`).
    pub async fn refund_if(ticket: Ticket, failed: bool) {
        if failed {
            Site::refund(ticket).await;
        }
    }

    /// Settles `ticket`'s call, a reservation of its cost, at `actual`
    /// (`settle = path`: what the function's result says it cost), and
    /// tells the observer the key's state after it. A failure is logged by
    /// the limiter, never returned.
    pub async fn settle(mut ticket: Ticket, actual: u64) {
        let Some(limiter) = ticket.refunding().cloned() else { return };
        if let Some(after) = ticket.settled(actual).await {
            observe(&limiter, &after);
        }
    }

    /// Gives back what `ticket`'s call took (its body failed, or never ran:
    /// a site stacked after it denied the call), and tells the observer
    /// the key's state after the refund, so the fields it writes never show
    /// a permit that came back as used. A failure is logged by the
    /// limiter, never returned.
    pub async fn refund(mut ticket: Ticket) {
        let Some(limiter) = ticket.refunding().cloned() else { return };
        if let Some(after) = ticket.refunded().await {
            observe(&limiter, &after);
        }
    }

    /// Warns once per site when another site already uses the same default name.
    fn warn_if_default_name_shared(&'static self) {
        static DEFAULT_NAMES: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
        let (name, address) = (self.limiter.name(), self as *const Site as usize);
        let mut names = DEFAULT_NAMES.lock().unwrap_or_else(PoisonError::into_inner);
        if names.iter().any(|(other_name, other)| other_name == name && *other != address) {
            tracing::warn!(
                target: "redlimit",
                limiter = name,
                "two #[rate_limit] functions have the default name `{name}` (methods of two types in one module?), so they share one limit; give each a `name = \"...\"` if that is not intended",
            );
        }
        if !names.iter().any(|(other_name, other)| other_name == name && *other == address) {
            names.push((name.to_string(), address));
        }
    }
}

/// [`Site::call`]'s future. When the site's limiter is built and lent (a
/// policy written in code, outside every scope) and its call a rate
/// policy's that returns its denial, it drives the pipeline itself
/// (`Limiter::poll_decide`) and makes what the answer gives the body in
/// the same poll, so a store in this process answers in the first poll;
/// else the call that admits it (a lease, a wait) or looks up, builds or
/// owns its limiter, boxed.
pub struct SiteCall<'a> {
    site: &'static Site,
    policy: Option<&'a Policy>,
    call: Call<'a>,
    state: SiteState<'a>,
    progress: Progress<'a>,
    /// The class the call is decided as (`priority = <argument>`).
    pub(crate) priority: Option<crate::policy::Priority>,
}

enum SiteState<'a> {
    Start,
    Deciding(&'static Limiter),
    Other(BoxFuture<'a, Result<Ticket, Box<RateLimited>>>),
}

impl Future for SiteCall<'_> {
    type Output = Result<Ticket, Box<RateLimited>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let SiteCall { site, policy, call, state, progress, priority } = self.get_mut();
        let (site, call): (&'static Site, Call<'_>) = (site, *call);
        if let SiteState::Start = state {
            *state = match (*policy, site.limiter.built()) {
                (None, Some(limiter)) if priority.is_none() && limiter.decides_only(limiter.enforcement.on_limit) => {
                    SiteState::Deciding(limiter)
                }
                (policy, _) => SiteState::Other(Box::pin(site.call_owned(policy, call, *priority))),
            };
        }
        match state {
            SiteState::Deciding(limiter) => {
                let limiter: &'static Limiter = limiter;
                let decided = ready!(limiter.poll_decide(call, progress, cx));
                Poll::Ready(match decided {
                    // An admission is the common answer: no permit to make and take apart.
                    Ok(decision) if decision.allowed => {
                        observe_admitted(limiter, &decision);
                        Ok(limiter.ticket(call, &decision, true, None))
                    }
                    decided => site.ticket(limiter, limiter.admitted(call, decided)),
                })
            }
            SiteState::Other(other) => other.as_mut().poll(cx),
            SiteState::Start => unreachable!("a call is started in its first poll"),
        }
    }
}

/// What is told of each call an annotated function admitted: the HTTP
/// layer registers one (its `DecisionHeadersLayer` writes their fields), so
/// the core never names it. One load while none is registered.
pub(crate) type Observer = fn(&Limiter, &Decision);

/// The observer of admitted calls, registered (`OnceLock::set`) by whatever
/// wants them; the first registered stays.
pub(crate) static OBSERVER: std::sync::OnceLock<Observer> = std::sync::OnceLock::new();

/// Tells the registered observer, if any, of a call `limiter` admitted.
#[inline]
fn observe_admitted(limiter: &Limiter, decision: &Decision) {
    // A decision with nothing to reset was not made by a store (it failed and
    // `on_error = allow` let the call through): it says nothing true about the limit.
    if !decision.reset_after.is_zero() {
        observe(limiter, decision);
    }
}

/// Tells the registered observer, if any, of `limiter`'s state of a key.
#[inline]
fn observe(limiter: &Limiter, decision: &Decision) {
    if let Some(observer) = OBSERVER.get() {
        observer(limiter, decision);
    }
}

/// A site's enforcement: refunds and dry run are added by the builders.
const fn enforcement(on_limit: OnLimit, on_error: OnError) -> Enforcement {
    Enforcement { on_limit, on_error, dry_run: false, refunds: false }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::rate_limited::DenialReason;
    use crate::store::Store;
    use std::sync::Once;

    /// The global store these sites are built on: memory, a clock that stands still.
    fn on_memory() {
        static INIT: Once = Once::new();
        INIT.call_once(|| crate::init(Store::memory().with_clock(ManualClock::new())).unwrap());
    }

    #[tokio::test]
    async fn each_call_is_decided_by_its_own_policy_and_a_key_keeps_its_count_across_policies() {
        on_memory();
        static SITE: Site = Site::per_call("site.per_call", OnLimit::Error, OnError::Allow);
        let (two, five) = (Policy::fixed_window("2/1m").unwrap(), Policy::fixed_window("5/1m").unwrap());

        SITE.call(Some(&two), Call::check(b"ann", 2)).await.unwrap();
        let denied = SITE.call(Some(&two), Call::check(b"ann", 1)).await.unwrap_err();
        assert_eq!((denied.decision().limit, denied.policy()), (2, Some(&two)));
        // Not the policy the limiter was built from: bob's own.
        SITE.call(Some(&five), Call::check(b"bob", 5)).await.unwrap();
        // Ann moves to five: her 2 still count, so 3 are left.
        SITE.call(Some(&five), Call::check(b"ann", 3)).await.unwrap();
        let denied = SITE.call(Some(&five), Call::check(b"ann", 1)).await.unwrap_err();
        assert_eq!((denied.decision().limit, denied.decision().remaining), (5, 0));
    }

    #[tokio::test]
    async fn let_through_lets_a_denial_through_and_counts_nothing_for_it() {
        on_memory();
        static SITE: Site = Site::per_call("site.admit", OnLimit::Error, OnError::Allow);
        let one = Policy::fixed_window("1/1m").unwrap();
        SITE.let_through(SITE.call(Some(&one), Call::check(b"k", 1)).await);
        SITE.let_through(SITE.call(Some(&one), Call::check(b"k", 1)).await); // denied, let through with a warning
        let three = Policy::fixed_window("3/1m").unwrap();
        SITE.call(Some(&three), Call::check(b"k", 2)).await.unwrap();
        assert_eq!(SITE.call(Some(&three), Call::check(b"k", 1)).await.unwrap_err().decision().remaining, 0);
    }

    #[tokio::test]
    async fn a_per_call_site_asked_without_a_policy_is_settled_by_on_error() {
        on_memory();
        static OPEN: Site = Site::per_call("site.open", OnLimit::Error, OnError::Allow);
        static CLOSED: Site = Site::per_call("site.closed", OnLimit::Error, OnError::Deny);
        assert!(OPEN.call(None, Call::check(b"k", 1)).await.is_ok());
        assert_eq!(
            CLOSED.call(None, Call::check(b"k", 1)).await.unwrap_err().reason(),
            DenialReason::PolicyNotConfigured
        );
    }
}
