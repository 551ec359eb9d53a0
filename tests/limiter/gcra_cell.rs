//! GCRA answers exactly as redis-cell's `CL.THROTTLE key burst count period qty`
//! does: (limited, limit, remaining, retry_after, reset_after), on both backends.
//!
//! Rows 0-14 are redis-cell's own reference timeline (burst 4, 1 per second:
//! limit 5); the rest work its definition through a rate whose emission
//! interval is not a whole number of microseconds (3 per second).

use redlimit::{Limiter, Policy};
use redlimit_test_support::stores::BothStores;

struct Row {
    at_us: u64,
    quantity: u64,
    limited: bool,
    remaining: u64,
    /// `None` is redis-cell's -1.
    retry_after_us: Option<u64>,
    reset_after_us: u64,
}

const fn row(
    at_ms: u64,
    quantity: u64,
    limited: bool,
    remaining: u64,
    retry_after_ms: i64,
    reset_after_ms: u64,
) -> Row {
    Row {
        at_us: at_ms * 1000,
        quantity,
        limited,
        remaining,
        retry_after_us: if retry_after_ms < 0 { None } else { Some(retry_after_ms as u64 * 1000) },
        reset_after_us: reset_after_ms * 1000,
    }
}

/// `CL.THROTTLE k 4 1 1 <qty>`: burst 4, one per second.
const ONE_PER_SECOND: [Row; 15] = [
    row(0, 6, true, 5, -1, 0), // larger than the limit: never, state untouched
    row(0, 1, false, 4, -1, 1000),
    row(0, 1, false, 3, -1, 2000),
    row(0, 1, false, 2, -1, 3000),
    row(0, 1, false, 1, -1, 4000),
    row(0, 1, false, 0, -1, 5000),
    row(0, 1, true, 0, 1000, 5000),
    row(3000, 1, false, 2, -1, 3000),
    row(3100, 1, false, 1, -1, 3900),
    row(4000, 1, false, 1, -1, 4000),
    row(8000, 1, false, 4, -1, 1000),
    row(9500, 1, false, 4, -1, 1000),
    row(9500, 0, false, 4, -1, 1000), // quantity 0 only reports
    row(9500, 2, false, 2, -1, 3000),
    row(9500, 5, true, 2, 3000, 3000),
];

/// `CL.THROTTLE k 2 3 1 <qty>`: burst 2, three per second; T = 333 333.3 µs, tolerance 1 s.
const THREE_PER_SECOND: [Row; 4] = [
    Row { at_us: 0, quantity: 3, limited: false, remaining: 0, retry_after_us: None, reset_after_us: 1_000_000 },
    // TAT - now = 999 999 µs; adding T overshoots the tolerance by T - 1 µs = 333 332.3 µs.
    Row { at_us: 1, quantity: 1, limited: true, remaining: 0, retry_after_us: Some(333_333), reset_after_us: 999_999 },
    // Obeying the retry: 666 666 µs of debt plus T = 999 999.3 µs, within the tolerance.
    Row { at_us: 333_334, quantity: 1, limited: false, remaining: 0, retry_after_us: None, reset_after_us: 1_000_000 },
    // TAT = 1 333 333.3 µs: at 1 s, 333 333.3 µs of debt (reported rounded up) leave room for 2.
    Row { at_us: 1_000_000, quantity: 0, limited: false, remaining: 2, retry_after_us: None, reset_after_us: 333_334 },
];

async fn replay(both: &BothStores, name: &str, policy: Policy, rows: &[Row]) {
    for (backend, store) in both.each() {
        let limiter = Limiter::new(format!("{name}-{backend}"), policy.clone(), store);
        let start = redlimit::Clock::now_us(&both.clock).unwrap();
        for (i, r) in rows.iter().enumerate() {
            both.clock.set_us(start + r.at_us);
            let d = limiter.check("cell", r.quantity).await.unwrap();
            let got = (
                !d.allowed,
                d.limit,
                d.remaining,
                d.retry_after.map(|t| t.as_micros() as u64),
                d.reset_after.as_micros() as u64,
            );
            let want = (r.limited, policy_limit(&policy), r.remaining, r.retry_after_us, r.reset_after_us);
            assert_eq!(got, want, "{backend} {policy} row {i}");
        }
        both.clock.set_us(start + 60_000_000);
    }
}

fn policy_limit(policy: &Policy) -> u64 {
    policy.max_cost()
}

#[tokio::test]
async fn gcra_matches_redis_cell_reference_timeline() {
    let both = BothStores::start().await;
    replay(&both, "cell-1ps", Policy::gcra("1/1s", 4).unwrap(), &ONE_PER_SECOND).await;
    replay(&both, "cell-3ps", Policy::gcra("3/1s", 2).unwrap(), &THREE_PER_SECOND).await;
}
