//! Concurrency: at most `limit` permits held at once on a key, each a lease
//! that ends `lease_us` after it was taken or last renewed. Twin of
//! `lua/concurrency.lua`.
//!
//! A lease counts while `now < until`: from its end on it holds nothing,
//! and a write (acquire, release, renew) first drops the ended ones. A
//! check or peek reports whether `cost` permits are free and holds nothing.

use crate::backend::{CallKind, Outcome, PermitId};

/// The permits held on one key.
#[derive(Debug, Clone, Default)]
pub(crate) struct Holders {
    permits: Vec<Held>,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    id: PermitId,
    weight: u64,
    until: u64,
}

impl Holders {
    /// Permits whose lease has not ended at `now`.
    fn held_at(&self, now: u64) -> u64 {
        self.permits.iter().filter(|p| p.until > now).map(|p| p.weight).sum()
    }

    /// µs until the last lease ends.
    fn reset_after(&self, now: u64) -> u64 {
        self.permits.iter().map(|p| p.until.saturating_sub(now)).max().unwrap_or(0)
    }

    fn find(&self, id: PermitId, weight: u64) -> Option<usize> {
        self.permits.iter().position(|p| p.id == id && p.weight == weight)
    }
}

/// Decides one call; also whether it wrote `state`.
pub(crate) fn decide(
    limit: u64,
    lease_us: u64,
    state: &mut Option<Holders>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    let mut holders = state.take().unwrap_or_default();
    let writes = matches!(kind, CallKind::Acquire(_) | CallKind::Release(_) | CallKind::Renew(_));
    let before = holders.permits.len();
    if writes {
        holders.permits.retain(|p| p.until > now);
    }
    let mut wrote = holders.permits.len() != before;
    let mut held = holders.held_at(now);
    let fits = cost <= limit && held <= limit - cost;
    let (allowed, remaining) = match kind {
        CallKind::Acquire(id) => {
            if fits && cost > 0 {
                holders.permits.push(Held { id, weight: cost, until: now + lease_us });
                held += cost;
                wrote = true;
            }
            (fits, limit.saturating_sub(held))
        }
        CallKind::Release(id) => {
            if let Some(at) = holders.find(id, cost) {
                holders.permits.swap_remove(at);
                held -= cost;
                wrote = true;
            }
            (true, limit.saturating_sub(held))
        }
        CallKind::Renew(id) => {
            let found = holders.find(id, cost);
            if let Some(at) = found {
                holders.permits[at].until = now + lease_us;
                wrote = true;
            }
            (found.is_some(), limit.saturating_sub(held))
        }
        CallKind::Check | CallKind::Peek | CallKind::Refund(_) => match fits {
            true => (true, limit - held - cost),
            false => (false, limit.saturating_sub(held)),
        },
    };
    let outcome = Outcome {
        allowed,
        limit,
        remaining,
        reset_after_us: holders.reset_after(now),
        retry_after_us: None,
        violated: 0,
        now_us: now,
        quotas: Vec::new(),
    };
    *state = (!holders.permits.is_empty()).then_some(holders);
    (outcome, wrote)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_767_225_600_000_000;

    fn id(n: u8) -> PermitId {
        PermitId([n; 16])
    }

    #[test]
    fn permits_are_held_until_released_or_their_lease_ends() {
        let mut state = None;
        let mut call = |at: u64, cost, kind| decide(2, 1_000, &mut state, T0 + at, cost, kind).0;
        let first = call(0, 1, CallKind::Acquire(id(1)));
        assert_eq!((first.allowed, first.remaining, first.reset_after_us), (true, 1, 1_000));
        assert_eq!(call(10, 1, CallKind::Peek).remaining, 0, "a peek answers as an acquire would");
        assert!(call(10, 1, CallKind::Acquire(id(2))).allowed);
        let full = call(20, 1, CallKind::Acquire(id(3)));
        assert_eq!((full.allowed, full.remaining, full.retry_after_us), (false, 0, None));
        assert!(call(30, 1, CallKind::Release(id(1))).allowed);
        assert_eq!(call(30, 1, CallKind::Release(id(1))).remaining, 1, "released twice: given back once");
        assert!(call(500, 1, CallKind::Renew(id(2))).allowed);
        assert!(!call(1_000, 1, CallKind::Renew(id(1))).allowed, "released: not renewed");
        assert_eq!(call(1_499, 1, CallKind::Peek).remaining, 0, "renewed at 500: held until 1500");
        assert_eq!(call(1_500, 1, CallKind::Peek).remaining, 1, "its lease ended");
        assert!(!call(1_500, 1, CallKind::Renew(id(2))).allowed, "an ended lease is never taken again");
        assert_eq!(call(1_500, 2, CallKind::Acquire(id(4))).remaining, 0);
    }

    #[test]
    fn a_cost_above_the_limit_is_denied_and_cost_zero_holds_nothing() {
        let mut state = None;
        assert!(!decide(2, 1_000, &mut state, T0, 3, CallKind::Acquire(id(1))).0.allowed);
        let (zero, wrote) = decide(2, 1_000, &mut state, T0, 0, CallKind::Acquire(id(1)));
        assert!(zero.allowed && !wrote && state.is_none());
    }
}
