//! [`Batcher`]: group commit. A backend's calls of one script (one family
//! of algorithm, whatever the policy or limiter) that wait at the same time
//! go to Redis as one script call (`lua/batch.lua`), decided one after
//! another in arrival order.
//!
//! Each lane (one script and a group of keys: all keys on one server; a
//! cluster node's, or a slot's, on a cluster) keeps a few script calls in flight.
//! A call that finds fewer in flight is sent at once, alone: it is never
//! held back for company. A call that finds them all busy waits, and when a
//! script call of its group comes back, the calls then waiting go together
//! in the next one. So a lone caller pays nothing, and under load a script
//! call's own cost (its round trip in the client, argument handling and
//! script entry in Redis, Redis's clock) is paid once per batch; each
//! call's algorithm still does its own reads and writes.

use super::batched::{BatchFailure, Batched};
use super::grouping::Grouping;
use crate::backend::redis::eval::Eval;
use crate::backend::redis::scripts::arguments::Sent;
use crate::backend::redis::scripts::family::Family;
use crate::backend::redis::scripts::plan::Plan;
use crate::backend::{CallKind, Outcome};
use crate::error::{Error, Failure};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;

/// Script calls one group keeps in flight before its next calls wait to go
/// together. BENCHMARKS.md has the measurements it was chosen by.
const IN_FLIGHT: usize = 4;

/// The most calls one script call carries. BENCHMARKS.md has the measurements.
pub(crate) const MAX_BATCH: usize = 64;

/// A backend's calls, gathered into script calls.
#[derive(Clone)]
pub(crate) struct Batcher {
    eval: Arc<Eval>,
    lanes: Arc<Lanes>,
}

/// Every lane, under one lock held only to count and queue.
struct Lanes {
    grouping: Grouping,
    by_lane: Mutex<HashMap<LaneId, Lane>>,
}

/// A lane: one script, one group of keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LaneId {
    group: u32,
    family: Family,
}

/// One lane's script calls in flight and the calls waiting for the next.
#[derive(Default)]
struct Lane {
    in_flight: usize,
    waiting: VecDeque<Waiting>,
}

/// A call waiting to go in a batch, and where its answer goes.
struct Waiting {
    batched: Batched,
    answer: oneshot::Sender<Result<Outcome, Error>>,
}

impl Lanes {
    fn lock(&self) -> MutexGuard<'_, HashMap<LaneId, Lane>> {
        // Nothing panics while the lock is held; a poisoned map is still whole.
        self.by_lane.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Batcher {
    pub(crate) fn new(eval: Arc<Eval>, grouping: Grouping) -> Batcher {
        Batcher { eval, lanes: Arc::new(Lanes { grouping, by_lane: Mutex::default() }) }
    }

    /// Decides one call on `key` (a storage key) under `plan`: at once when
    /// its lane has room in flight, else in the batch that follows.
    pub(crate) async fn decide(&self, plan: &Arc<Plan>, key: Vec<u8>, call: Sent) -> Result<Outcome, Error> {
        let lane_id = LaneId { group: self.lanes.grouping.group(&key), family: plan.family };
        // Err(key): there is room in flight, and the call goes at once.
        let queued = {
            let mut lanes = self.lanes.lock();
            let lane = lanes.entry(lane_id).or_default();
            if lane.in_flight < IN_FLIGHT {
                lane.in_flight += 1;
                Err(key)
            } else {
                let (answer, answered) = oneshot::channel();
                lane.waiting.push_back(Waiting { batched: Batched { key, call, plan: plan.clone() }, answer });
                Ok(answered)
            }
        };
        let answered = match queued {
            Ok(answered) => answered,
            Err(key) => {
                // Handed on when this call is answered or dropped.
                let _flight = Flight { eval: self.eval.clone(), lanes: self.lanes.clone(), lane_id, held: true };
                return self.eval.one(plan, &key, call).await;
            }
        };
        match tokio::time::timeout(self.eval.response_timeout, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(Error::Unavailable(Failure::new(
                "the batch holding this call was dropped before Redis answered (the runtime is shutting down)",
            ))),
            // Its batch may still be sent: like a single call that timed out, it may have counted.
            Err(_) => Err(Error::Timeout(self.eval.response_timeout)),
        }
    }
}

/// One script call's place in its lane. Whoever holds it sends the
/// calls waiting in that lane; dropped (its call answered, or its caller
/// gone), it hands the place to a task that sends them, or gives it up.
/// A batch's task yields once before gathering the next: no timer, and
/// only while batches run, so a lone call is never held.
struct Flight {
    eval: Arc<Eval>,
    lanes: Arc<Lanes>,
    lane_id: LaneId,
    held: bool,
}

impl Flight {
    /// The calls waiting in this flight's lane (those whose callers are
    /// still there), up to a batch; or `None`, giving the place up.
    fn next(&mut self) -> Option<Vec<Waiting>> {
        let mut lanes = self.lanes.lock();
        let Some(lane) = lanes.get_mut(&self.lane_id) else {
            self.held = false;
            return None;
        };
        let mut batch = Vec::new();
        while batch.len() < MAX_BATCH {
            match lane.waiting.pop_front() {
                // Its caller gave up (a timeout, a dropped future): not sent, so not counted.
                Some(waiting) if waiting.answer.is_closed() => {}
                Some(waiting) => batch.push(waiting),
                None => break,
            }
        }
        if !batch.is_empty() {
            return Some(batch);
        }
        lane.in_flight -= 1;
        if lane.in_flight == 0 {
            lanes.remove(&self.lane_id);
        }
        self.held = false;
        None
    }

    /// Sends `batch`, then whatever waits next, until nothing does.
    async fn drive(mut self, mut batch: Vec<Waiting>) {
        loop {
            send(&self.eval, &self.lanes.grouping, self.lane_id.family, batch).await;
            // The callers just answered mostly call again at once: letting
            // their tasks run first puts those calls in the next batch
            // rather than in the one after.
            tokio::task::yield_now().await;
            match self.next() {
                Some(next) => batch = next,
                None => return,
            }
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let Some(batch) = self.next() else { return };
        let flight = Flight { eval: self.eval.clone(), lanes: self.lanes.clone(), lane_id: self.lane_id, held: true };
        match tokio::runtime::Handle::try_current() {
            // A task of its own: the caller that held the place has its answer and goes on.
            Ok(runtime) => drop(runtime.spawn(flight.drive(batch))),
            // No runtime to send them on: their callers learn the batch was dropped.
            Err(_) => {
                drop(batch);
                let mut flight = flight;
                while flight.next().is_some() {}
            }
        }
    }
}

/// Sends `batch`, all of `family`, as one script call and answers each of
/// its calls; a single call goes as a single call would.
async fn send(eval: &Eval, grouping: &Grouping, family: Family, batch: Vec<Waiting>) {
    if let [_] = &batch[..] {
        let Waiting { batched, answer } = batch.into_iter().next().expect("one call");
        let outcome = eval.one(&batched.plan, &batched.key, batched.call).await;
        return reply(eval, &batched, answer, outcome).await;
    }
    let (calls, answers): (Vec<Batched>, Vec<_>) =
        batch.into_iter().map(|Waiting { batched, answer }| (batched, answer)).unzip();
    match eval.batch(family, &calls, grouping.declares_every_key()).await {
        Ok(outcomes) => {
            for ((batched, answer), outcome) in calls.iter().zip(answers).zip(outcomes) {
                reply(eval, batched, answer, outcome).await;
            }
        }
        Err(BatchFailure::Failed(error)) => {
            for answer in answers {
                let _ = answer.send(Err(error.clone()));
            }
        }
        Err(BatchFailure::Misrouted) => {
            // The cluster's slots moved: learn where they are now, and send
            // these calls one by one, in their order, each to its own node.
            grouping.misrouted(&eval.connection);
            for (batched, answer) in calls.iter().zip(answers) {
                let outcome = eval.one(&batched.plan, &batched.key, batched.call).await;
                reply(eval, batched, answer, outcome).await;
            }
        }
    }
}

/// Answers `batched`'s caller. An acquisition whose caller left while it
/// waited in a batch (a timeout, a dropped future) may have taken a permit
/// that nobody holds: the release its caller sent as it left can have
/// reached Redis first (this call was gathered but not yet sent), finding
/// nothing. So it is given back here, after the acquisition.
async fn reply(
    eval: &Eval,
    batched: &Batched,
    answer: oneshot::Sender<Result<Outcome, Error>>,
    outcome: Result<Outcome, Error>,
) {
    let Err(Ok(outcome)) = answer.send(outcome) else { return };
    let (CallKind::Acquire(id), true) = (batched.call.kind, outcome.allowed && batched.call.cost > 0) else { return };
    let release = Sent { kind: CallKind::Release(id), ..batched.call };
    if let Err(error) = eval.one(&batched.plan, &batched.key, release).await {
        // Its lease gives it back when it ends.
        tracing::debug!(target: "redlimit", %error, "could not give back the permit of an acquisition whose caller left");
    }
}
