//! How late another task's timer fires while some tasks loop: the measure
//! of the cooperative-budget tests.

use std::time::{Duration, Instant};

/// Sleeps 20 ms `sleeps` times and returns the median overshoot: how much
/// later than asked each sleep ended. A runtime whose workers are held by
/// tasks that never yield shows hundreds of ms here; one whose tasks yield,
/// a few. The median leaves out a rare hiccup of a busy machine.
pub async fn median_sleep_overshoot(sleeps: usize) -> Duration {
    let asked = Duration::from_millis(20);
    let mut overshoots = Vec::with_capacity(sleeps);
    for _ in 0..sleeps {
        let started = Instant::now();
        tokio::time::sleep(asked).await;
        overshoots.push(started.elapsed().saturating_sub(asked));
    }
    overshoots.sort();
    overshoots[sleeps / 2]
}
