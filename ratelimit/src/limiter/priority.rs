//! A limiter deciding as one class of call ([`Priority`]): each class of a
//! policy with headroom is that policy scaled to the class's share
//! ([`Policy::for_priority`]), bound once and decided against the same key,
//! so every call kind (check, peek, refunds, permits) works per class.

use crate::limiter::{Inner, Limiter, Rule};
use crate::policy::{Policy, Priority};
use once_cell::sync::OnceCell;
use std::sync::Arc;

/// The rules of every class of one policy with headroom, each bound at its
/// first call; the critical class's is the policy's own rule.
pub(crate) struct Classes {
    /// The rule of the whole policy (critical calls).
    base: Arc<Rule>,
    /// Low's and normal's rules.
    scaled: [OnceCell<Arc<Rule>>; 2],
}

impl Classes {
    fn new(base: Arc<Rule>) -> Classes {
        Classes { base, scaled: Default::default() }
    }

    /// The rule `class` decides by, bound on first need (a trial's when the policy's rule is one).
    fn rule(&self, inner: &Inner, class: Priority) -> Arc<Rule> {
        let at = match class {
            Priority::Low => 0,
            Priority::Normal => 1,
            Priority::Critical => return self.base.clone(),
        };
        let policy: Policy = self.base.policy.for_priority(class);
        self.scaled[at].get_or_init(|| Arc::new(Rule::new(inner, policy, self.base.trial))).clone()
    }
}

impl Limiter {
    /// This limiter deciding as `class`: under a policy with headroom
    /// ([`Policy::with_headroom`]), by the class's share of every limit,
    /// against the same state of each key, so lower classes' calls count
    /// against higher classes' limits and never the other way round. Every
    /// call works per class (`check`, `peek`, `limit`, `wait`, `acquire`,
    /// refunds, which give back only what their call took), and a decision
    /// (its `limit`, `remaining`, `reset_after`, and the RateLimit header
    /// fields made from it) is the class's own. A cheap clone: each class is
    /// bound once per limiter. Under a policy without headroom every class
    /// decides alike. A limiter decides as [`Priority::Normal`] until told.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Priority, Store};
    ///
    /// let policy = Policy::fixed_window("10/1m")?.with_headroom(50, 20)?;
    /// let api = Limiter::new("api", policy, &Store::memory().with_clock(ManualClock::new()));
    /// let (low, critical) = (api.with_priority(Priority::Low), api.with_priority(Priority::Critical));
    /// let mut passed = 0;
    /// for _ in 0..100 {
    ///     passed += low.check("tenant", 1).await?.allowed as u32;
    /// }
    /// assert_eq!(passed, 5, "low calls stop at half the limit");
    /// assert_eq!((api.check("tenant", 0).await?.limit, api.check("tenant", 0).await?.remaining), (8, 3));
    /// let d = critical.check("tenant", 5).await?;
    /// assert_eq!((d.allowed, d.limit, d.remaining), (true, 10, 0), "critical calls get the rest");
    /// # Ok(()) }
    /// ```
    pub fn with_priority(&self, class: Priority) -> Limiter {
        let rule = match &self.classes {
            Some(classes) => classes.rule(&self.inner, class),
            None => self.rule.clone(),
        };
        Limiter { rule, priority: class, ..self.clone() }
    }

    /// The class this limiter decides as ([`with_priority`](Self::with_priority)).
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The policy this limiter was given, its headroom included (where
    /// [`policy`](Self::policy) is its class's share of it).
    pub(crate) fn whole_policy(&self) -> &Policy {
        self.classes.as_ref().map_or(&self.rule.policy, |classes| &classes.base.policy)
    }

    /// This limiter once its rule was set to a whole policy's: its classes
    /// (kept when the rule is the one they were made of), and its own class's rule.
    pub(crate) fn classed(mut self) -> Limiter {
        if self.rule.policy.headroom().is_none() {
            self.classes = None;
            return self;
        }
        let classes = match self.classes.take() {
            Some(classes) if Arc::ptr_eq(&classes.base, &self.rule) => classes,
            _ => Arc::new(Classes::new(self.rule.clone())),
        };
        self.rule = classes.rule(&self.inner, self.priority);
        self.classes = Some(classes);
        self
    }

    /// This limiter deciding by its whole policy's rule, for a change of
    /// that rule (dry run) to be followed by [`classed`](Self::classed).
    pub(crate) fn unclassed(mut self) -> Limiter {
        if let Some(classes) = &self.classes {
            self.rule = classes.base.clone();
        }
        self
    }
}
