//! Concurrency: at most `limit` permits held at once on a key, each a lease
//! that ends `lease_us` after it was taken or last renewed. Twin of
//! `lua/concurrency.lua`.
//!
//! A lease counts while `now < until`: from its end on it holds nothing,
//! and a write (acquire, release, renew) first drops the ended ones. A
//! check or peek reports whether `cost` permits are free and holds nothing.

use crate::backend::{CallKind, Outcome, PermitId};
use std::collections::{BTreeSet, HashMap};

/// The permits held on one key, found by id and by lease end, so no call's
/// work grows with the permits held: a permit's call finds its own in the
/// map, the ended leases drop from the front of the ordered set, and the
/// last lease's end is its back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Holders {
    /// A permit's lease end, by its id and weight (the script's member).
    ends: HashMap<(PermitId, u64), u64>,
    /// The same permits by lease end, soonest first: `(until, id, weight)`.
    by_end: BTreeSet<(u64, [u8; 16], u64)>,
    /// The weights of the permits in `ends`, their leases ended or not (the
    /// script's `''` member: a count no call sums again).
    held: u64,
}

impl Holders {
    /// The ended leases, soonest first: those whose end is at `now` or before.
    fn ended(&self, now: u64) -> impl Iterator<Item = &(u64, [u8; 16], u64)> {
        self.by_end.iter().take_while(move |(until, ..)| *until <= now)
    }

    /// Drops the leases ended at `now`; whether there were any.
    fn drop_ended(&mut self, now: u64) -> bool {
        let mut dropped = false;
        while let Some(&(until, id, weight)) = self.by_end.first() {
            if until > now {
                break;
            }
            visited(1);
            self.by_end.pop_first();
            self.ends.remove(&(PermitId(id), weight));
            self.held = self.held.saturating_sub(weight);
            dropped = true;
        }
        dropped
    }

    /// Permits whose lease has not ended at `now`: the count less the
    /// ended leases not yet dropped (a report drops none, as the script's).
    fn held_at(&self, now: u64) -> u64 {
        self.ended(now).fold(self.held, |held, (_, _, weight)| {
            visited(1);
            held.saturating_sub(*weight)
        })
    }

    /// µs until the last lease ends.
    fn reset_after(&self, now: u64) -> u64 {
        self.by_end.last().map_or(0, |(until, ..)| until.saturating_sub(now))
    }

    /// Runs the permit's lease to `until`, adding it when new.
    fn hold(&mut self, id: PermitId, weight: u64, until: u64) {
        visited(1);
        if let Some(old) = self.ends.insert((id, weight), until) {
            self.by_end.remove(&(old, id.0, weight));
        }
        self.by_end.insert((until, id.0, weight));
    }

    /// The lease end of the permit `id` of `weight`, when it is held.
    fn find(&self, id: PermitId, weight: u64) -> Option<u64> {
        visited(1);
        self.ends.get(&(id, weight)).copied()
    }

    /// Gives back the permit `id` of `weight`; whether it was held.
    fn remove(&mut self, id: PermitId, weight: u64) -> bool {
        visited(1);
        let Some(until) = self.ends.remove(&(id, weight)) else { return false };
        self.by_end.remove(&(until, id.0, weight));
        self.held = self.held.saturating_sub(weight);
        true
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
    let mut wrote = writes && holders.drop_ended(now);
    let mut held = holders.held_at(now);
    let fits = cost <= limit && held <= limit - cost;
    let until = now.saturating_add(lease_us);
    let (allowed, remaining) = match kind {
        CallKind::Acquire(id) => {
            if fits && cost > 0 {
                // A second acquisition of a held id runs its lease again and
                // counts once more, as the script's `ZADD` and count do.
                holders.hold(id, cost, until);
                holders.held = holders.held.saturating_add(cost);
                held = held.saturating_add(cost);
                wrote = true;
            }
            (fits, limit.saturating_sub(held))
        }
        CallKind::Release(id) => {
            if holders.remove(id, cost) {
                held -= cost;
                wrote = true;
            }
            (true, limit.saturating_sub(held))
        }
        CallKind::Renew(id) => {
            let found = holders.find(id, cost).is_some();
            if found {
                holders.hold(id, cost, until);
                wrote = true;
            }
            (found, limit.saturating_sub(held))
        }
        CallKind::Check | CallKind::Peek | CallKind::Refund(_) | CallKind::Charge => match fits {
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
    *state = (!holders.ends.is_empty()).then_some(holders);
    (outcome, wrote)
}

/// Counts the permits a call's own code looks at (the tests' measure of
/// work per call); nothing outside the tests.
#[cfg(test)]
fn visited(n: u64) {
    tests::VISITED.with(|v| v.set(v.get() + n));
}

#[cfg(not(test))]
#[inline(always)]
fn visited(_: u64) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        pub(super) static VISITED: Cell<u64> = const { Cell::new(0) };
    }

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

    fn many(n: u32) -> PermitId {
        let mut id = [0; 16];
        id[..4].copy_from_slice(&n.to_le_bytes());
        PermitId(id)
    }

    /// Permits looked at by `call`.
    fn work<T>(call: impl FnOnce() -> T) -> (T, u64) {
        VISITED.with(|v| v.set(0));
        let result = call();
        (result, VISITED.with(Cell::get))
    }

    /// A call's work does not grow with the permits held: with 20,000 held
    /// on one key, each renewed in turn through three leases, no renewal,
    /// release or another caller's acquisition looks at more than the
    /// permits it changes or that ended.
    #[test]
    fn a_call_looks_only_at_its_own_permit_and_the_ended_leases() {
        const N: u32 = 20_000;
        const LEASE: u64 = 30_000_000;
        let mut state = None;
        let mut call = |at: u64, kind| work(|| decide(N as u64, LEASE, &mut state, T0 + at, 1, kind).0);
        for n in 0..N {
            let (taken, looked) = call(u64::from(n), CallKind::Acquire(many(n)));
            assert!(taken.allowed && looked <= 2, "acquisition {n}: looked at {looked}");
        }
        for round in 1..=9 {
            for n in 0..N {
                let (renewed, looked) = call(round * LEASE / 3 + u64::from(n), CallKind::Renew(many(n)));
                assert!(renewed.allowed, "round {round}: permit {n} lost its lease while renewed");
                assert!(looked <= 2, "round {round}: renewing permit {n} looked at {looked}");
            }
        }
        let at = 9 * LEASE / 3 + u64::from(N);
        let (full, looked) = call(at, CallKind::Acquire(many(N)));
        assert_eq!((full.allowed, full.remaining), (false, 0), "every one of the permits still held");
        assert!(looked <= 1, "another caller's acquisition looked at {looked}");
        let (report, looked) = call(at, CallKind::Peek);
        assert!(!report.allowed && looked == 0, "a report looked at {looked}");
        let (released, looked) = call(at, CallKind::Release(many(7)));
        assert_eq!((released.remaining, looked), (1, 1));
        let (taken, looked) = call(at, CallKind::Acquire(many(N)));
        assert!(taken.allowed && looked <= 2);
        // The leases end together: each is dropped once, by the first write after.
        let (after, looked) = call(at + LEASE, CallKind::Release(many(N + 1)));
        assert_eq!((after.remaining, looked), (u64::from(N), u64::from(N) + 1));
        assert!(state.is_none(), "no permit held: no state");
    }

    /// A report counts the leases that ended without dropping them (as the
    /// script does), so a later report at an earlier time still sees them.
    #[test]
    fn a_report_drops_nothing_and_a_repeated_acquisition_counts_again() {
        let mut state = None;
        let mut call = |at: u64, cost, kind| decide(3, 1_000, &mut state, T0 + at, cost, kind);
        assert!(call(0, 1, CallKind::Acquire(id(1))).0.allowed);
        assert!(call(500, 1, CallKind::Acquire(id(2))).0.allowed);
        let (ended, wrote) = call(1_000, 1, CallKind::Peek);
        assert_eq!((ended.remaining, ended.reset_after_us, wrote), (1, 500, false));
        assert_eq!(call(999, 1, CallKind::Peek).0.remaining, 0, "still held at 999");
        let again = call(999, 1, CallKind::Acquire(id(2))).0;
        assert_eq!(
            (again.allowed, again.remaining, again.reset_after_us),
            (true, 0, 1_000),
            "the script's ZADD and count"
        );
        assert_eq!(
            call(1_999, 1, CallKind::Release(id(2))).0.remaining,
            2,
            "both leases ended; the second count of id 2 stays, as in the script"
        );
    }
}
