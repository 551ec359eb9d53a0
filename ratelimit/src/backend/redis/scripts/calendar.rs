//! [`CalendarPlans`]: a fixed window with calendar strategies sends the
//! bounds of the calendar window each call falls in (`lua/policy_windows.lua`),
//! so its numbers are made again once per calendar window, not per call.

use super::plan::{calendar_windows, Plan};
use crate::policy::{Policy, Strategy};
use arc_swap::ArcSwap;
use std::sync::Arc;

/// A calendar policy's plan for the calendar windows holding one time, and
/// the span of times it serves: from the latest start to the earliest end
/// of its strategies' windows.
#[derive(Debug)]
struct Windowed {
    from_us: u64,
    until_us: u64,
    plan: Arc<Plan>,
}

/// The plans of one bound calendar policy: the current window's, made again
/// when a call's time leaves it. Calls of one window share one plan, so a
/// batch sends its numbers once.
#[derive(Debug)]
pub(crate) struct CalendarPlans {
    template: Plan,
    strategies: Vec<Strategy>,
    current: ArcSwap<Windowed>,
}

impl CalendarPlans {
    /// The plans of `plan`'s policy, if it has calendar strategies.
    pub(crate) fn of(policy: &Policy, plan: &Plan) -> Option<CalendarPlans> {
        let strategies = policy.strategies();
        if strategies.iter().all(|s| s.calendar.is_none()) {
            return None;
        }
        // Serves no time: the first call makes its window's.
        let current = ArcSwap::from_pointee(Windowed { from_us: 1, until_us: 0, plan: Arc::new(plan.clone()) });
        Some(CalendarPlans { template: plan.clone(), strategies: strategies.to_vec(), current })
    }

    /// The plan of the calendar windows holding `now_us`.
    pub(crate) fn at(&self, now_us: u64) -> Arc<Plan> {
        let current = self.current.load();
        if (current.from_us..current.until_us).contains(&now_us) {
            return current.plan.clone();
        }
        let made = Arc::new(windowed(&self.template, &self.strategies, now_us));
        let plan = made.plan.clone();
        self.current.store(made);
        plan
    }
}

fn windowed(template: &Plan, strategies: &[Strategy], now_us: u64) -> Windowed {
    let (policy, from_us, until_us) = calendar_windows(strategies, now_us);
    Windowed { from_us, until_us, plan: Arc::new(Plan { policy, ..template.clone() }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(numbers: &[u8]) -> Vec<f64> {
        numbers.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn a_calendar_plan_names_its_window_and_is_made_again_past_it() {
        let policy = Policy::fixed_window("5/1d@UTC,2/1s").unwrap();
        let plan = super::super::plan::plan(&policy, true);
        let plans = CalendarPlans::of(&policy, &plan).unwrap();
        let day = 86_400_000_000u64;
        let first = plans.at(3 * day + 5);
        assert_eq!(read(&first.policy), [-1.0, 5.0, day as f64, (3 * day) as f64, 2.0, 1e6, -1.0]);
        assert!(Arc::ptr_eq(&first, &plans.at(4 * day - 1)), "one plan per window");
        assert_eq!(read(&plans.at(4 * day).policy)[3], (4 * day) as f64);
        assert!(CalendarPlans::of(&Policy::fixed_window("2/1s").unwrap(), &plan).is_none());
    }
}
