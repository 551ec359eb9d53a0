//! How a script call's reply reads: one call's, or a batch's (`lua/batch.lua`),
//! each call's outcome as the call alone would have got.

use super::batched::{BatchFailure, Batched};
use crate::backend::redis::scripts::arguments::Sent;
use crate::backend::{CallKind, Outcome};
use crate::error::Error;
use redis::Value;

/// The outcomes of a batch of `calls` that replied `reply`: one result per
/// call, a call that failed or replied malformed failing alone.
pub(crate) fn outcomes(calls: &[Batched], reply: Value) -> Result<Vec<Result<Outcome, Error>>, BatchFailure> {
    match reply {
        Value::BulkString(joined) => Ok(split_joined(calls, &joined)?),
        Value::Array(replies) if replies.len() == calls.len() => Ok(replies
            .into_iter()
            .zip(calls)
            .map(|(reply, Batched { call, plan, .. })| match reply {
                // This call's own failure (its key holds another type): its alone.
                Value::Array(failed) if matches!(&failed[..], [Value::BulkString(_)]) => Err(call_failed(&failed[0])),
                reply => plan.reply.outcome(reply, replied_cost(*call)),
            })
            .collect()),
        other => Err(BatchFailure::Failed(Error::Protocol(format!(
            "a batch of {} calls replied {other:?}: expected one reply per call",
            calls.len()
        )))),
    }
}

/// The outcomes of a batch whose replies came joined into one string
/// (`lua/batch.lua`), each call's the next bytes of its reply's width.
fn split_joined(calls: &[Batched], joined: &[u8]) -> Result<Vec<Result<Outcome, Error>>, BatchFailure> {
    let malformed = || {
        BatchFailure::Failed(Error::Protocol(format!(
            "a batch of {} calls replied {} joined bytes: not one reply per call",
            calls.len(),
            joined.len()
        )))
    };
    let mut at = 0;
    let mut outcomes = Vec::with_capacity(calls.len());
    for Batched { call, plan, .. } in calls {
        let width = plan.reply.joined_width().ok_or_else(malformed)?;
        let bytes = joined.get(at..at + width).ok_or_else(malformed)?;
        outcomes.push(plan.reply.joined_outcome(bytes, replied_cost(*call)));
        at += width;
    }
    if at != joined.len() {
        return Err(malformed());
    }
    Ok(outcomes)
}

/// The error of one call of a batch, as `lua/batch.lua` replies it (a
/// table of one string): an `Error::Server`, as the call alone would get.
fn call_failed(message: &Value) -> Error {
    let text = match message {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => format!("{other:?}"),
    };
    Error::Server(crate::error::Failure::new(format!("Redis answered with an error: {text}")))
}

/// The cost a reply is read for: a refund or a charge replies as a check of cost 0.
pub(crate) fn replied_cost(call: Sent) -> u64 {
    match call.kind {
        CallKind::Refund(_) | CallKind::Charge => 0,
        _ => call.cost,
    }
}

#[cfg(test)]
mod tests {
    use super::super::batched::gcra_calls as batched;
    use super::*;

    #[test]
    fn joined_replies_are_split_by_each_calls_width() {
        use CallKind::*;
        let calls = batched(&[(1, Check, None), (2, Check, None)]);
        // gcra 1/1s, burst 1: one emission is 1 000 000 units, the tolerance 2 000 000.
        let reply = |v: f64, now: f64| [v.to_le_bytes(), now.to_le_bytes()].concat();
        let joined = [reply(1e6, 7.0), reply(-1.0 - 1e6, 7.0)].concat();
        let outcomes = split_joined(&calls, &joined).ok().unwrap();
        assert!(outcomes[0].as_ref().unwrap().allowed && !outcomes[1].as_ref().unwrap().allowed);
        assert!(split_joined(&calls, &joined[..24]).is_err(), "short");
        assert!(split_joined(&calls, &[joined.clone(), reply(0.0, 7.0)].concat()).is_err(), "long");
    }
}
