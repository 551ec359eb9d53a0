//! The reference model of `tests/features_meet.rs`: what every admitted call
//! of a randomized run is replayed against, by the times its decision reported.
//!
//! Each rule is the policy's own definition, stated on what passed, with every
//! refunded call left out as if it had never been made. A model finds the
//! calls it would not have admitted (over-admissions); a run passes with none.
//! It never reads what the store says about its own state: only `allowed`,
//! the cost, the policy the call named and `decided_at`.

use std::collections::BTreeMap;

/// One decided call, as a worker records it and a process writes it on a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// Which of the run's keys.
    pub key: u32,
    /// Index of the policy it was decided under, in the run's list.
    pub policy: u32,
    /// Permits asked.
    pub cost: u64,
    /// Whether it passed (for a dry-run trial: whether its decision said so).
    pub allowed: bool,
    /// `Decision::decided_at`, µs since the epoch.
    pub at_us: u64,
    /// Whether a refund of all of it was sent later (made or not: either way
    /// the model leaving it out only asks more of the store).
    pub refunded: bool,
    /// Spent from this process's prefetched permits, maybe.
    pub prefetch: bool,
    /// Decided under a dry-run trial: it passes whatever it says, and is not
    /// part of what the enforced policies admitted.
    pub trial: bool,
    /// A settlement's charge: what a reservation cost above its estimate,
    /// taken when it settled. Never denied, so counted but never judged.
    pub charge: bool,
}

impl Call {
    /// The call on one line, for a child process's output.
    pub fn to_line(&self) -> String {
        let flags = |b: bool| u8::from(b);
        format!(
            "{} {} {} {} {} {} {} {} {}",
            self.key,
            self.policy,
            self.cost,
            flags(self.allowed),
            self.at_us,
            flags(self.refunded),
            flags(self.prefetch),
            flags(self.trial),
            flags(self.charge)
        )
    }

    /// The call of a line [`to_line`](Self::to_line) wrote; `None` for any other line.
    pub fn from_line(line: &str) -> Option<Call> {
        let n: Vec<u64> = line.split(' ').map(str::parse).collect::<Result<_, _>>().ok()?;
        let [key, policy, cost, allowed, at_us, refunded, prefetch, trial, charge] = n[..] else { return None };
        Some(Call {
            key: u32::try_from(key).ok()?,
            policy: u32::try_from(policy).ok()?,
            cost,
            allowed: allowed == 1,
            at_us,
            refunded: refunded == 1,
            prefetch: prefetch == 1,
            trial: trial == 1,
            charge: charge == 1,
        })
    }

    /// Passed under an enforced policy: what the model replays (a refunded
    /// one only for the window it may have started, never for what it took).
    fn passed(&self) -> bool {
        self.allowed && !self.trial
    }
}

/// Seeded draws (splitmix64): the same seed, the same calls.
pub struct Draws(u64);

impl Draws {
    /// Draws from `seed`.
    pub fn new(seed: u64) -> Draws {
        Draws(seed)
    }

    /// A draw in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }

    /// A draw in `lo..hi`.
    pub fn range<T: Into<u64> + TryFrom<u64> + Copy>(&mut self, lo: T, hi: T) -> T {
        let (l, h) = (lo.into(), hi.into());
        T::try_from(l + self.below(h.saturating_sub(l))).unwrap_or(lo)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.below(1 << 53) as f64) < p * (1u64 << 53) as f64
    }
}

/// A call the model would not have admitted, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Excess {
    /// The call.
    pub call: Call,
    /// What the rule found, in words.
    pub why: String,
}

/// The passed calls of each key, in the order the rule replays them: by
/// time, and among calls of one µs the one `strictness` ranks lowest first
/// (the order in which each passes most easily, so a tie never makes an
/// excess the store did not commit).
fn by_key(calls: &[Call], strictness: impl Fn(&Call) -> u64) -> BTreeMap<u32, Vec<Call>> {
    let mut keys: BTreeMap<u32, Vec<Call>> = BTreeMap::new();
    for call in calls.iter().filter(|c| c.passed()) {
        keys.entry(call.key).or_default().push(*call);
    }
    for calls in keys.values_mut() {
        calls.sort_by_key(|c| (c.at_us, strictness(c)));
    }
    keys
}

/// Token bucket, leaky bucket and GCRA alike: what a key owes, a debt paid
/// off at `rate_per_s` and never clipped at the top. A call is admissible
/// only if the debt of every earlier counted call, paid off at the rate,
/// plus its own cost, fits `capacity_of(call)` (a bucket's capacity, GCRA's
/// burst + 1) plus `slack` (README's prefetch bound; 0 without prefetch).
/// An excess is not added to the debt, so each one is counted once; a
/// charge is added whatever the debt, never judged.
///
/// Under plans of several rates pass the fastest: the store never pays off
/// faster than the fastest plan in force, so the rule asks no more than it.
pub fn bucket_excess(calls: &[Call], capacity_of: impl Fn(&Call) -> u64, rate_per_s: f64, slack: f64) -> Vec<Excess> {
    let per_us = rate_per_s / 1e6;
    debt_excess(calls, capacity_of, |from, to| per_us * to.saturating_sub(from) as f64, slack)
}

/// An interval refill: `n` tokens at once at each end of a period of
/// `period_us`, the periods counted from the epoch.
pub type Interval = (u64, u64);

/// The ends of periods of `period_us` (counted from the epoch) in `(from, to]`:
/// a call at a period's end already finds its tokens.
pub fn period_ends(from: u64, to: u64, period_us: u64) -> u64 {
    (to / period_us).saturating_sub(from / period_us)
}

/// Token bucket refilled by interval, stated as [`bucket_excess`] is: a debt
/// never clipped at the top, paid off by `n` at each period end of every
/// interval in `intervals`, and at `rate_per_s` in between. Over any span of
/// time a key admits at most its capacity plus `n` for each period end inside
/// the span (plus `rate_per_s` times the span).
///
/// A key of one interval plan passes its interval and a rate of 0: the store
/// pays only at period ends, however its writes fall. A key whose plans mix
/// refills passes every interval among them and the fastest pace, an
/// interval's `n / period` included (a change of rate pays the old debt off
/// at that pace): each stretch between two writes (calls, or denials and
/// refunds the model cannot place) is paid by one refill, so a gap between
/// calls is paid at most the fastest pace throughout plus every interval's
/// count at each of its ends.
pub fn interval_bucket_excess(
    calls: &[Call],
    capacity_of: impl Fn(&Call) -> u64,
    rate_per_s: f64,
    intervals: &[Interval],
) -> Vec<Excess> {
    let per_us = rate_per_s / 1e6;
    let paid = |from: u64, to: u64| {
        let counts: u64 = intervals.iter().map(|&(n, period_us)| n * period_ends(from, to, period_us)).sum();
        per_us * to.saturating_sub(from) as f64 + counts as f64
    };
    debt_excess(calls, capacity_of, paid, 0.0)
}

/// The bucket rules: a key's debt, paid off by `paid(from, to)` between its
/// counted calls, and never below zero (a full bucket).
fn debt_excess(
    calls: &[Call],
    capacity_of: impl Fn(&Call) -> u64,
    paid: impl Fn(u64, u64) -> f64,
    slack: f64,
) -> Vec<Excess> {
    let mut excess = Vec::new();
    for calls in by_key(calls, &capacity_of).values() {
        let (mut owed, mut last) = (0.0f64, 0u64);
        for call in calls.iter().filter(|c| !c.refunded) {
            owed = (owed - paid(last, call.at_us)).max(0.0);
            last = last.max(call.at_us);
            if call.charge {
                owed += call.cost as f64;
                continue;
            }
            let capacity = capacity_of(call) as f64 + slack;
            // A millionth of a permit: the store counts in exact integers, this in floats.
            if owed + call.cost as f64 > capacity + 1e-6 {
                let why = format!("owed {owed:.3} + cost {} > capacity {capacity}", call.cost);
                excess.push(Excess { call: *call, why });
            } else {
                owed += call.cost as f64;
            }
        }
    }
    excess
}

/// One strategy: at most `limit` permits per `window_us`.
pub type Strategy = (u64, u64);

/// Fixed window: per strategy position, a window starts at the first passed
/// call at or after the previous window's end (its length read from the
/// policy of the call that asks), and counts what the calls in it took
/// (a refunded call starts a window, as it did in the store, and counts
/// nothing). A call is admissible only if, in every strategy of its policy,
/// the count of the window it falls in plus its cost fits the limit; a
/// charge is counted past it, never judged.
pub fn fixed_window_excess<'a>(calls: &[Call], strategies_of: impl Fn(&Call) -> &'a [Strategy]) -> Vec<Excess> {
    let mut excess = Vec::new();
    let strictness = |c: &Call| strategies_of(c).iter().map(|s| s.0).sum();
    for calls in by_key(calls, strictness).values() {
        // Per position: the window's start and count.
        let mut windows: Vec<Option<(u64, u64)>> = Vec::new();
        for call in calls {
            let strategies = strategies_of(call);
            windows.resize(windows.len().max(strategies.len()), None);
            let live =
                |slot: Option<(u64, u64)>, window_us: u64| slot.filter(|&(start, _)| call.at_us < start + window_us);
            let cost = if call.refunded { 0 } else { call.cost };
            let over = strategies.iter().enumerate().find(|(i, &(limit, window_us))| {
                !call.refunded
                    && !call.charge
                    && live(windows[*i], window_us).map_or(0, |(_, count)| count) + cost > limit
            });
            if let Some((i, (limit, _))) = over {
                let why = format!("strategy {i}: window {:?} + cost {} > {limit}", windows[i], call.cost);
                excess.push(Excess { call: *call, why });
                continue;
            }
            for (slot, &(_, window_us)) in windows.iter_mut().zip(strategies) {
                *slot = Some(match live(*slot, window_us) {
                    Some((start, count)) => (start, count + cost),
                    None => (call.at_us, cost),
                });
            }
        }
    }
    excess
}

/// Sliding log: a call is admissible only if, in every strategy of its
/// policy, the counted calls of the last `window_us` (after `at - window`,
/// up to and with `at`) plus its cost fit the limit.
pub fn sliding_log_excess<'a>(calls: &[Call], strategies_of: impl Fn(&Call) -> &'a [Strategy]) -> Vec<Excess> {
    sliding_excess(calls, strategies_of, |at, window_us| (at + 1).saturating_sub(window_us), "log")
}

/// Sliding window of sub-windows of `precision_us` (aligned to multiples of
/// it): a call is admissible only if, in every strategy, the counted calls
/// of the `window / precision` newest sub-windows, its own included, plus
/// its cost fit the limit.
pub fn sliding_window_excess<'a>(
    calls: &[Call],
    strategies_of: impl Fn(&Call) -> &'a [Strategy],
    precision_us: u64,
) -> Vec<Excess> {
    let span =
        move |at: u64, window_us: u64| (at / precision_us + 1).saturating_sub(window_us / precision_us) * precision_us;
    sliding_excess(calls, strategies_of, span, "sub-windows")
}

/// The sliding rules: a call at `at` is judged with the counted calls from
/// `since(at, window)` up to and with `at`.
fn sliding_excess<'a>(
    calls: &[Call],
    strategies_of: impl Fn(&Call) -> &'a [Strategy],
    since: impl Fn(u64, u64) -> u64,
    what: &str,
) -> Vec<Excess> {
    let mut excess = Vec::new();
    let strictness = |c: &Call| strategies_of(c).iter().map(|s| s.0).sum();
    for calls in by_key(calls, strictness).values() {
        let mut passed: Vec<(u64, u64)> = Vec::new();
        for call in calls.iter().filter(|c| !c.refunded) {
            let over = strategies_of(call).iter().filter(|_| !call.charge).find_map(|&(limit, window_us)| {
                let from = since(call.at_us, window_us);
                let counted: u64 = passed.iter().rev().take_while(|p| p.0 >= from).map(|p| p.1).sum();
                (counted + call.cost > limit)
                    .then(|| format!("{what} of {window_us} µs hold {counted} + cost {} > {limit}", call.cost))
            });
            match over {
                Some(why) => excess.push(Excess { call: *call, why }),
                None => passed.push((call.at_us, call.cost)),
            }
        }
    }
    excess
}

/// One concurrency permit as its holder saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// `decided_at` of the acquisition that granted it, µs.
    pub from_us: u64,
    /// The holder's clock (the same machine's) just before it gave the
    /// permit back, by `release().await` or by drop.
    pub until_us: u64,
    /// When its holder was stopped (no renewal could run), if it was: from
    /// then on its lease may be lost, and the model no longer counts it.
    pub stopped_us: Option<u64>,
    /// Whether the holder, once it ran again, was told its permit was lost.
    pub told_lost: bool,
    /// When a stopped holder ran again (0 for the others).
    pub woke_us: u64,
}

impl Hold {
    /// The hold on one line, for a child process's output.
    pub fn to_line(&self) -> String {
        let stopped = self.stopped_us.map_or("-".to_string(), |s| s.to_string());
        format!("{} {} {stopped} {} {}", self.from_us, self.until_us, u8::from(self.told_lost), self.woke_us)
    }

    /// The hold of a line [`to_line`](Self::to_line) wrote.
    pub fn from_line(line: &str) -> Option<Hold> {
        let words: Vec<&str> = line.split(' ').collect();
        let [from, until, stopped, told, woke] = words[..] else { return None };
        Some(Hold {
            from_us: from.parse().ok()?,
            until_us: until.parse().ok()?,
            stopped_us: if stopped == "-" { None } else { Some(stopped.parse().ok()?) },
            told_lost: told == "1",
            woke_us: woke.parse().ok()?,
        })
    }

    /// Until when the model counts it live.
    fn counted_until(&self) -> u64 {
        self.stopped_us.map_or(self.until_us, |s| s.min(self.until_us))
    }
}

/// Concurrency: at every instant, the holders counted live (from their
/// grant to their release, a stopped one only until it was stopped) are at
/// most `limit`. Returns the most found live at once, and when. Releases at
/// one µs are counted before grants: a release is read before it is sent.
pub fn most_live(holds: &[Hold]) -> (usize, u64) {
    let mut edges: Vec<(u64, i8)> = Vec::new();
    for hold in holds {
        edges.push((hold.from_us, 1));
        edges.push((hold.counted_until().max(hold.from_us), -1));
    }
    edges.sort_unstable();
    let (mut live, mut most) = (0i64, (0usize, 0u64));
    for (at, step) in edges {
        live += i64::from(step);
        if live as usize > most.0 {
            most = (live as usize, at);
        }
    }
    most
}

/// As [`most_live`], but a stopped holder that was not told its permit was
/// lost is counted again from when it ran again (`woke_us`) to its release:
/// its body ran on beside the others. The rule once a lost lease is told.
pub fn most_live_counting_untold(holds: &[Hold]) -> (usize, u64) {
    let mut counted = holds.to_vec();
    for hold in holds.iter().filter(|h| h.stopped_us.is_some() && !h.told_lost) {
        counted.push(Hold {
            from_us: hold.woke_us,
            until_us: hold.until_us,
            stopped_us: None,
            told_lost: false,
            woke_us: 0,
        });
    }
    most_live(&counted)
}

/// The stopped holders whose permit another holder took while they were
/// stopped (at their stop, `limit` others were live at some instant before
/// they ran again), and whether each was told: `(taken, told)`.
pub fn lost_and_told(holds: &[Hold], limit: usize) -> (usize, usize) {
    let (mut taken, mut told) = (0, 0);
    for stopped in holds.iter().filter(|h| h.stopped_us.is_some()) {
        let (from, until) = (stopped.stopped_us.unwrap_or(0), stopped.until_us);
        let others: Vec<Hold> = holds
            .iter()
            .filter(|h| *h != stopped && h.from_us < until && h.counted_until() > from)
            .map(|h| Hold {
                from_us: h.from_us.max(from),
                until_us: h.counted_until().min(until),
                stopped_us: None,
                told_lost: false,
                woke_us: 0,
            })
            .collect();
        if most_live(&others).0 >= limit {
            taken += 1;
            told += usize::from(stopped.told_lost);
        }
    }
    (taken, told)
}
