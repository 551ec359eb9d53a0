//! What the `metrics` facade recorded in this test binary: one debugging
//! recorder, installed on first use, its snapshots added up (a snapshot
//! drains the recorder). Used by the `observability*` test binaries.

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use once_cell::sync::OnceCell;
use std::sync::{Mutex, MutexGuard};

/// One recorder for this test binary (tests use distinct limiter names), and
/// everything it recorded so far: a snapshot drains the recorder, so values
/// are added up here.
pub struct Recorded {
    snapshotter: Snapshotter,
    /// (name, labels, counter total).
    counters: Vec<(String, Labels, u64)>,
    /// (name, labels, histogram samples).
    histograms: Vec<(String, Labels, Vec<f64>)>,
    /// (name, labels, the gauge: a snapshot drains gauges too, so their moves are added up).
    gauges: Vec<(String, Labels, f64)>,
}

type Labels = Vec<(String, String)>;

pub fn recorded() -> MutexGuard<'static, Recorded> {
    static RECORDED: OnceCell<Mutex<Recorded>> = OnceCell::new();
    let mut recorded = RECORDED
        .get_or_init(|| {
            let recorder = DebuggingRecorder::new();
            let snapshotter = recorder.snapshotter();
            recorder.install().expect("no other recorder in this test binary");
            Mutex::new(Recorded { snapshotter, counters: Vec::new(), histograms: Vec::new(), gauges: Vec::new() })
        })
        .lock()
        .unwrap();
    for (key, _, _, value) in recorded.snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let name = key.name().to_string();
        let labels: Labels = key.labels().map(|l| (l.key().to_string(), l.value().to_string())).collect();
        match (kind, value) {
            (MetricKind::Counter, DebugValue::Counter(n)) => {
                match recorded.counters.iter_mut().find(|(n2, l2, _)| *n2 == name && *l2 == labels) {
                    Some(entry) => entry.2 += n,
                    None => recorded.counters.push((name, labels, n)),
                }
            }
            (MetricKind::Histogram, DebugValue::Histogram(values)) => {
                let values = values.into_iter().map(|v| v.into_inner());
                match recorded.histograms.iter_mut().find(|(n2, l2, _)| *n2 == name && *l2 == labels) {
                    Some(entry) => entry.2.extend(values),
                    None => recorded.histograms.push((name, labels, values.collect())),
                }
            }
            (MetricKind::Gauge, DebugValue::Gauge(value)) => {
                match recorded.gauges.iter_mut().find(|(n2, l2, _)| *n2 == name && *l2 == labels) {
                    Some(entry) => entry.2 += value.into_inner(),
                    None => recorded.gauges.push((name, labels, value.into_inner())),
                }
            }
            _ => {}
        }
    }
    recorded
}

/// The latest value of the gauge `name` whose labels include every pair given.
pub fn gauge(name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    recorded().gauges.iter().find(|(n, l, _)| n == name && has_labels(l, labels)).map(|(_, _, v)| *v)
}

fn has_labels(labels: &[(String, String)], wanted: &[(&str, &str)]) -> bool {
    wanted.iter().all(|(k, v)| labels.iter().any(|(k2, v2)| k2 == k && v2 == v))
}

/// The total of the counters `name` whose labels include every pair given.
pub fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    recorded().counters.iter().filter(|(n, l, _)| n == name && has_labels(l, labels)).map(|(_, _, v)| v).sum()
}

/// Every sample of the histogram `name` recorded for `limiter`.
pub fn histogram_samples(name: &str, limiter: &str) -> Vec<f64> {
    let recorded = recorded();
    recorded
        .histograms
        .iter()
        .filter(|(n, l, _)| n == name && has_labels(l, &[("limiter", limiter)]))
        .flat_map(|(_, _, v)| v.clone())
        .collect()
}
