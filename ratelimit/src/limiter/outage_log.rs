//! [`OutageLog`]: how often one failing store is worth a log line. The
//! first failure is said at once, then at most one line per [`LOG_INTERVAL`]
//! counting the failures meanwhile, and the recovery once; so an outage
//! under load costs a handful of lines, not one per call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The shortest time between two lines about one outage.
pub(crate) const LOG_INTERVAL: Duration = Duration::from_secs(10);
const INTERVAL_US: u64 = LOG_INTERVAL.as_micros() as u64;

/// What to say about a failure, when it is time to say something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// An outage begins: say it with its error. `earlier` failures of short
    /// outages (over before a line was due) were not said yet.
    First { earlier: u64 },
    /// The outage goes on: `failures` since the last line, which was `over` ago.
    Ongoing { failures: u64, over: Duration },
}

/// An outage that was reported is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recovery {
    pub(crate) lasted: Duration,
    pub(crate) failures: u64,
}

/// One limiter's (or one connector's) outage bookkeeping. Times are µs on
/// whatever clock the caller reads (a manual clock in tests).
#[derive(Debug)]
pub(crate) struct OutageLog {
    /// Set while failing: what a success reads, the only cost when all is well.
    failing: AtomicBool,
    state: Mutex<Outage>,
}

#[derive(Debug, Default)]
struct Outage {
    failing: bool,
    /// The current outage has had a line.
    reported: bool,
    since_us: u64,
    last_line_us: Option<u64>,
    /// Failures not counted in any line yet.
    unreported: u64,
    /// Failures of the current outage.
    failures: u64,
}

impl Default for OutageLog {
    fn default() -> Self {
        OutageLog::new()
    }
}

impl OutageLog {
    pub(crate) const fn new() -> OutageLog {
        let state =
            Outage { failing: false, reported: false, since_us: 0, last_line_us: None, unreported: 0, failures: 0 };
        OutageLog { failing: AtomicBool::new(false), state: Mutex::new(state) }
    }

    /// Records a failure at `now_us`; what to log, if a line is due.
    pub(crate) fn failed(&self, now_us: u64) -> Option<Report> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.failing {
            *state = Outage {
                failing: true,
                since_us: now_us,
                last_line_us: state.last_line_us,
                unreported: state.unreported,
                ..Outage::default()
            };
            self.failing.store(true, Ordering::Relaxed);
        }
        state.failures += 1;
        state.unreported += 1;
        // A clock set back is no reason to stay silent.
        let due = state.last_line_us.is_none_or(|last| now_us < last || now_us - last >= INTERVAL_US);
        if !due {
            return None;
        }
        let report = match state.last_line_us {
            Some(last) if state.reported => {
                Report::Ongoing { failures: state.unreported, over: Duration::from_micros(now_us.saturating_sub(last)) }
            }
            _ => Report::First { earlier: state.unreported - 1 },
        };
        state.reported = true;
        state.unreported = 0;
        state.last_line_us = Some(now_us);
        Some(report)
    }

    /// Records a success; the recovery to log, once per reported outage. A
    /// short outage never reported stays silent: its failures are counted
    /// in the next line. `now_us` is read only when an outage ends.
    #[inline]
    pub(crate) fn answered(&self, now_us: impl FnOnce() -> u64) -> Option<Recovery> {
        if !self.failing.load(Ordering::Relaxed) {
            return None;
        }
        self.ended(now_us())
    }

    #[cold]
    fn ended(&self, now_us: u64) -> Option<Recovery> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.failing {
            return None;
        }
        state.failing = false;
        self.failing.store(false, Ordering::Relaxed);
        if !state.reported {
            return None;
        }
        state.unreported = 0;
        Some(Recovery {
            lasted: Duration::from_micros(now_us.saturating_sub(state.since_us)),
            failures: state.failures,
        })
    }
}

/// `d` to the millisecond, for a log line.
pub(crate) fn rounded(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis().min(u64::MAX as u128) as u64)
}

#[cfg(test)]
mod tests {
    use crate::limiter::outage_log::*;

    const S: u64 = 1_000_000;

    #[test]
    fn an_outage_is_said_at_once_then_once_per_interval_then_its_end() {
        let log = OutageLog::default();
        assert_eq!(log.answered(|| 0), None, "nothing failed");
        assert_eq!(log.failed(S), Some(Report::First { earlier: 0 }));
        for at in 1..1000 {
            assert_eq!(log.failed(S + at), None);
        }
        assert_eq!(log.failed(11 * S), Some(Report::Ongoing { failures: 1000, over: Duration::from_secs(10) }));
        assert_eq!(log.failed(15 * S), None);
        assert_eq!(log.answered(|| 16 * S), Some(Recovery { lasted: Duration::from_secs(15), failures: 1002 }));
        assert_eq!(log.answered(|| 17 * S), None, "said once");
    }

    #[test]
    fn flapping_costs_at_most_a_line_or_two_per_interval() {
        let log = OutageLog::default();
        let mut lines = 0;
        // One failure and one success every 10 ms for 60 s.
        for at in (0..60 * S).step_by(10_000) {
            lines += usize::from(log.failed(at).is_some());
            lines += usize::from(log.answered(|| at + 1).is_some());
        }
        assert!(lines <= 2 * 6 + 2, "{lines} lines");
        // The blips between lines are counted in the next one.
        assert_eq!(log.failed(70 * S), Some(Report::First { earlier: 999 }));
    }

    #[test]
    fn a_clock_set_back_does_not_silence_it() {
        let log = OutageLog::default();
        assert!(log.failed(100 * S).is_some());
        assert!(log.failed(5 * S).is_some());
    }
}
