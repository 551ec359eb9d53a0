//! The background sweeper: one thread for the whole process that, every
//! [`SWEEP_EVERY_US`], has each live memory store drop what expired, so a
//! burst's memory is given back even when no call comes to sweep it.

use super::sharded::SWEEP_EVERY_US;
use once_cell::sync::Lazy;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Something the sweeper visits: it drops its own dead values.
pub(crate) trait Sweep: Send + Sync {
    fn sweep(&self);
}

/// What the sweeper visits, held weakly: a dropped store is simply skipped.
static SWEPT: Lazy<Mutex<Vec<Weak<dyn Sweep>>>> = Lazy::new(|| {
    // If no thread can be started, stores are still swept by their calls.
    let started = std::thread::Builder::new().name("redlimit-sweeper".into()).spawn(run);
    if let Err(error) = started {
        tracing::warn!(%error, "no background sweeper: memory stores are swept by their calls only");
    }
    Mutex::new(Vec::new())
});

/// Has the sweeper visit `target` for as long as it lives.
pub(crate) fn register(target: Weak<dyn Sweep>) {
    // The list is only pushed to and filtered: a poisoned lock holds it whole.
    SWEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(target);
}

fn run() {
    loop {
        std::thread::sleep(Duration::from_micros(SWEEP_EVERY_US));
        let live: Vec<Arc<dyn Sweep>> = {
            let mut swept = SWEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            swept.retain(|target| target.strong_count() > 0);
            swept.iter().filter_map(Weak::upgrade).collect()
        };
        for target in live {
            target.sweep();
        }
    }
}
