//! Each policy's definition, as a replay: how many of one key's admitted
//! calls, given as `(decided_at_us, cost)` in any order, broke it (0 when
//! exact). They follow DESIGN.md's definitions, not the implementation.

/// Sorted by time; ties keep their order.
fn sorted(hits: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut hits = hits.to_vec();
    hits.sort_by_key(|&(t, _)| t);
    hits
}

/// Fixed window: a window starts at the first admitted hit after the
/// previous one ended and lasts `window_us`; at most `limit` per window.
pub fn fixed_window(hits: &[(u64, u64)], limit: u64, window_us: u64) -> usize {
    let mut start: Option<u64> = None;
    let mut count = 0;
    let mut broken = 0;
    for (t, cost) in sorted(hits) {
        match start {
            Some(s) if t - s < window_us => count += cost,
            _ => (start, count) = (Some(t), cost),
        }
        broken += usize::from(count > limit);
    }
    broken
}

/// Sliding log: every half-open window `(t - W, t]` holds at most `limit`.
pub fn sliding_log(hits: &[(u64, u64)], limit: u64, window_us: u64) -> usize {
    let hits = sorted(hits);
    let (mut first, mut sum, mut broken) = (0, 0, 0);
    for j in 0..hits.len() {
        sum += hits[j].1;
        while hits[first].0 + window_us <= hits[j].0 {
            sum -= hits[first].1;
            first += 1;
        }
        broken += usize::from(sum > limit);
    }
    broken
}

/// Sliding window over sub-windows of `precision_us`: every run of
/// `window / precision` consecutive aligned sub-windows holds at most
/// `limit`. (Any unaligned window of length W spans one sub-window more,
/// which is the documented approximation.)
pub fn sliding_window(hits: &[(u64, u64)], limit: u64, window_us: u64, precision_us: u64) -> usize {
    let span = window_us / precision_us;
    let mut per_sub: Vec<(u64, u64)> = Vec::new();
    for (t, cost) in sorted(hits) {
        let k = t / precision_us;
        match per_sub.last_mut() {
            Some((last, sum)) if *last == k => *sum += cost,
            _ => per_sub.push((k, cost)),
        }
    }
    let as_hits: Vec<(u64, u64)> = per_sub.iter().map(|&(k, sum)| (k, sum)).collect();
    // A run of `span` sub-windows is a sliding log over sub-window indexes.
    sliding_log(&as_hits, limit, span)
}

/// Token bucket of `capacity` refilled at `count` per `period_us`, starting
/// full: the tokens taken never exceed what was there.
pub fn token_bucket(hits: &[(u64, u64)], capacity: u64, count: u64, period_us: u64) -> usize {
    // Units: one token is `period_us` units; `count` units arrive per µs.
    let full = (capacity as u128) * period_us as u128;
    let (mut units, mut last, mut broken) = (full, None::<u64>, 0);
    for (t, cost) in sorted(hits) {
        if let Some(last) = last {
            units = (units + (t - last) as u128 * count as u128).min(full);
        }
        last = Some(t);
        let need = cost as u128 * period_us as u128;
        if need > units {
            broken += 1;
            units = 0;
        } else {
            units -= need;
        }
    }
    broken
}

/// Leaky bucket of `capacity` drained at `count` per `period_us`, starting
/// empty: the level never rises above the capacity.
pub fn leaky_bucket(hits: &[(u64, u64)], capacity: u64, count: u64, period_us: u64) -> usize {
    // Draining a level is refilling the room left: the same bookkeeping.
    token_bucket(hits, capacity, count, period_us)
}

/// GCRA with `burst`: at most `burst + 1` at once, then `count` per
/// `period_us`; the same limit as a token bucket of `burst + 1`.
pub fn gcra(hits: &[(u64, u64)], burst: u64, count: u64, period_us: u64) -> usize {
    token_bucket(hits, burst + 1, count, period_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(times_us: &[u64]) -> Vec<(u64, u64)> {
        times_us.iter().map(|&t| (t, 1)).collect()
    }

    #[test]
    fn fixed_window_catches_a_third_hit_in_one_window() {
        assert_eq!(fixed_window(&at(&[0, 5, 10, 15]), 2, 10), 0);
        assert_eq!(fixed_window(&at(&[0, 5, 9]), 2, 10), 1);
    }

    #[test]
    fn sliding_log_catches_crowded_windows_at_any_offset() {
        assert_eq!(sliding_log(&at(&[0, 10, 20, 30]), 1, 10), 0);
        assert_eq!(sliding_log(&at(&[0, 10, 19, 30]), 1, 10), 1);
        assert_eq!(sliding_log(&at(&[30, 0, 5]), 2, 10), 0, "order does not matter");
    }

    #[test]
    fn sliding_window_counts_aligned_runs_of_sub_windows() {
        // Window 20, precision 10: two sub-windows per run.
        assert_eq!(sliding_window(&at(&[0, 9, 15]), 2, 20, 10), 1);
        assert_eq!(sliding_window(&at(&[0, 9, 25]), 2, 20, 10), 0, "sub-windows 0 and 2 are not in one run");
        assert_eq!(sliding_window(&at(&[0, 9, 20, 29]), 2, 20, 10), 0);
    }

    #[test]
    fn buckets_catch_taking_faster_than_the_rate() {
        // Capacity 2, 1 token per 10 µs.
        assert_eq!(token_bucket(&at(&[0, 0, 10, 20]), 2, 1, 10), 0);
        assert_eq!(token_bucket(&at(&[0, 0, 9]), 2, 1, 10), 1);
        assert_eq!(leaky_bucket(&at(&[0, 0, 0]), 2, 1, 10), 1);
        assert_eq!(gcra(&at(&[0, 0, 10]), 1, 1, 10), 0);
        assert_eq!(gcra(&at(&[0, 0, 5]), 1, 1, 10), 1);
    }
}
