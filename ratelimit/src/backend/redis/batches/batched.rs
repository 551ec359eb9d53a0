//! A call of a batch, and how a batch fails as a whole.

use crate::backend::redis::scripts::arguments::Sent;
use crate::backend::redis::scripts::plan::Plan;
use crate::error::Error;
use std::sync::Arc;

/// One call of a batch: its storage key, the call, and its policy's plan.
pub(crate) struct Batched {
    pub(crate) key: Vec<u8>,
    pub(crate) call: Sent,
    pub(crate) plan: Arc<Plan>,
}

/// How a batch failed as a whole.
pub(crate) enum BatchFailure {
    /// As each of its calls would have failed alone.
    Failed(Error),
    /// A cluster refused it before running it: its keys are not all served
    /// by the node it reached (the slots moved). Sent one by one, each call
    /// finds its own node.
    Misrouted,
}

/// A gcra batch of `calls` (cost, kind, client clock) on one key, for the
/// batch's unit tests.
#[cfg(test)]
pub(crate) fn gcra_calls(calls: &[(u64, crate::backend::CallKind, Option<u64>)]) -> Vec<Batched> {
    let plan = Arc::new(crate::backend::redis::scripts::plan::plan(&crate::Policy::gcra("1/1s", 1).unwrap(), true));
    calls
        .iter()
        .map(|&(cost, kind, now_us)| Batched {
            key: b"k".to_vec(),
            call: Sent { cost, kind, now_us },
            plan: plan.clone(),
        })
        .collect()
}
