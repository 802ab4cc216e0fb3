//! Metrics in tests: `metrics-util`'s debugging recorder, installed once per test binary,
//! and what it recorded, by series. The snapshotter drains counters, gauges and histograms,
//! so every read adds its snapshot to one store, where each test finds its own series (give
//! each test its own lock family, and parallel tests never read each other's).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// A series of one kind (each kind has its own map): name and sorted `label=value` pairs.
type Series = (String, Vec<String>);

#[derive(Default)]
struct Recorded {
    /// Each metric's description (`# HELP`), by name.
    descriptions: HashMap<String, String>,
    counters: HashMap<Series, u64>,
    gauges: HashMap<Series, f64>,
    histograms: HashMap<Series, Vec<f64>>,
}

fn recorder() -> &'static (Snapshotter, Mutex<Recorded>) {
    static RECORDER: OnceLock<(Snapshotter, Mutex<Recorded>)> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        (snapshotter, Mutex::default())
    })
}

/// Installs the recorder (call it before the code under test records anything).
pub fn install() {
    recorder();
}

/// Reads every series recorded so far.
fn recorded<T>(read: impl FnOnce(&Recorded) -> T) -> T {
    let (snapshotter, store) = recorder();
    let mut store = store.lock().unwrap();
    for (key, _, description, value) in snapshotter.snapshot().into_vec() {
        if let Some(text) = description {
            (store.descriptions).insert(key.key().name().to_owned(), text.into_owned());
        }
        let mut labels: Vec<String> = key
            .key()
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let series = (key.key().name().to_owned(), labels);
        match value {
            DebugValue::Counter(n) => *store.counters.entry(series).or_default() += n,
            DebugValue::Gauge(g) => *store.gauges.entry(series).or_default() += g.0,
            DebugValue::Histogram(h) => store
                .histograms
                .entry(series)
                .or_default()
                .extend(h.iter().map(|v| v.0)),
        }
    }
    read(&store)
}

fn series(name: &str, labels: &[&str]) -> Series {
    let mut labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
    labels.sort();
    (name.to_owned(), labels)
}

/// The counter `name` with exactly these `label=value` pairs.
pub fn counter(name: &str, labels: &[&str]) -> u64 {
    let key = series(name, labels);
    recorded(|r| r.counters.get(&key).copied().unwrap_or(0))
}

/// Every series of the counter `name`: sorted `label=value` pairs and value.
pub fn counters(name: &str) -> Vec<(Vec<String>, u64)> {
    recorded(|r| {
        let mut all: Vec<_> = (r.counters.iter())
            .filter(|((n, _), _)| n == name)
            .map(|((_, labels), v)| (labels.clone(), *v))
            .collect();
        all.sort();
        all
    })
}

/// The gauge `name` with exactly these labels (the sum of its increments and decrements).
pub fn gauge(name: &str, labels: &[&str]) -> f64 {
    let key = series(name, labels);
    recorded(|r| r.gauges.get(&key).copied().unwrap_or(0.0))
}

/// The samples of the histogram `name` with exactly these labels.
pub fn histogram(name: &str, labels: &[&str]) -> Vec<f64> {
    let key = series(name, labels);
    recorded(|r| r.histograms.get(&key).cloned().unwrap_or_default())
}

/// The description of the metric `name`, once it has a series.
pub fn description(name: &str) -> Option<String> {
    recorded(|r| r.descriptions.get(name).cloned())
}
