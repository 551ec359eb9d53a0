//! [`RedisBound`]: one limiter bound to a Redis backend, deciding its keys.

use super::batches::batch::Batcher;
use super::connection::failure::from_redis;
use super::eval::{bounded, Eval};
use super::scripts::arguments::Sent;
use super::scripts::calendar::CalendarPlans;
use super::scripts::family::Family;
use super::scripts::plan::Plan;
use crate::backend::{Answer, Bound, BoxFuture, Call, CallKind};
use crate::clock::Clock;
use crate::error::Error;
use crate::policy::Policy;
use redlimit_grammar::AlgorithmKind;
use std::sync::Arc;

/// A limiter's prefix and policy bound to a Redis backend: the prefix of
/// its keys and its policy's [`Plan`], its calls sent one per script call
/// ([`Eval`]) or, with batching on, through the backend's [`Batcher`],
/// which gathers the calls of one script waiting at the same time into one
/// script call.
pub(crate) struct RedisBound {
    pub(super) eval: Arc<Eval>,
    pub(super) batcher: Option<Batcher>,
    pub(super) plan: Arc<Plan>,
    /// A calendar policy's plan per calendar window (then `plan` is unused).
    pub(super) calendar: Option<CalendarPlans>,
    pub(super) key_prefix: Vec<u8>,
    /// What the script's outcome becomes a [`Decision`](crate::Decision) under.
    pub(super) policy: Policy,
}

impl Bound for RedisBound {
    fn decide<'a>(&'a self, call: Call<'_>, clock: &dyn Clock) -> Answer<'a> {
        // The full key and the time are made here, so the round trip borrows nothing of the caller's.
        let storage_key = crate::key::storage_key(&self.key_prefix, call.key);
        // Failing fast is an answer made here: given at once, so the pipeline
        // spends the task's budget on it as on any answer without I/O.
        if let Some(failing_fast) = self.eval.breaker.open(&storage_key) {
            return Answer::Now(Err(failing_fast));
        }
        // A refund, a permit's call or a concurrency check only reaches the scripts that take it.
        if call.kind != CallKind::Peek {
            if let Some(refused) = crate::algo::refused(algorithm(self.plan.family), call.kind) {
                return Answer::Now(Err(refused));
            }
        }
        let mut now_us = clock.now_us();
        // Redis's clock cannot tell a zone's calendar: a calendar policy is
        // decided at this process's time, whose windows its numbers name.
        let calendar = self.calendar.as_ref().map(|plans| {
            let now = *now_us.get_or_insert_with(crate::clock::system_now_us);
            plans.at(crate::clock::bounded(now))
        });
        let sent = Sent { cost: call.cost, kind: call.kind, now_us };
        Answer::Later(Box::pin(async move {
            let plan = calendar.as_ref().unwrap_or(&self.plan);
            let outcome = match &self.batcher {
                Some(batcher) => batcher.decide(plan, storage_key, sent).await,
                None => self.eval.one(plan, &storage_key, sent).await,
            };
            outcome.map(|outcome| outcome.into_decision(&self.policy))
        }))
    }

    fn reset<'a>(&'a self, key: &[u8]) -> BoxFuture<'a, Result<(), Error>> {
        let storage_key = crate::key::storage_key(&self.key_prefix, key);
        Box::pin(async move {
            let mut connection = self.eval.connection.clone();
            // Bounded here: the connection itself has no response timeout.
            bounded(self.eval.response_timeout, redis::cmd("DEL").arg(&storage_key).exec_async(&mut connection))
                .await?
                .map_err(from_redis)
        })
    }

    fn remote(&self) -> bool {
        true
    }

    fn response_timeout(&self) -> Option<std::time::Duration> {
        Some(self.eval.response_timeout)
    }

    fn data_epoch(&self) -> u64 {
        self.eval.connection.watch.epoch()
    }
}

/// The algorithm a family's script decides.
fn algorithm(family: Family) -> AlgorithmKind {
    match family {
        Family::FixedWindow | Family::Counter => AlgorithmKind::FixedWindow,
        Family::SlidingWindow => AlgorithmKind::SlidingWindow,
        Family::SlidingLog => AlgorithmKind::SlidingLog,
        Family::TokenBucket => AlgorithmKind::TokenBucket,
        Family::LeakyBucket => AlgorithmKind::LeakyBucket,
        Family::Gcra => AlgorithmKind::Gcra,
        Family::Concurrency => AlgorithmKind::Concurrency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_limiter_can_be_shared_between_tasks() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<RedisBound>();
        shared::<Eval>();
    }
}
