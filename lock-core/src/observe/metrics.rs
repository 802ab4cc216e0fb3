//! The metrics sink: the series an [`Event`] moves, through the `metrics` facade (feature
//! `metrics`): any exporter works. Without the feature nothing is recorded.
//!
//! Every metric is labelled `template=` with the request's metrics label (see
//! [`LockRequest::metrics_label`](crate::LockRequest::metrics_label)): the key template a
//! name was made from, never the lock's name, so the number of series stays bounded. The names are listed in the crate
//! documentation.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

use std::borrow::Cow;
#[cfg(feature = "metrics")]
use std::time::Duration;

#[cfg(feature = "metrics")]
use crate::error::LockError;
use crate::observe::Event;

/// A bounded label value: the key template a lock name was made from, or
/// [`DEFAULT_LABEL`].
pub(crate) type MetricsLabel = Cow<'static, str>;

/// The label of requests that name none.
pub(crate) const DEFAULT_LABEL: &str = "default";

/// The label's key.
pub(crate) const LABEL: &str = "template";

/// Acquisition attempts by outcome (`acquired`, `timeout`, `unavailable`).
pub(crate) const ACQUISITIONS: &str = "distlock_acquisitions_total";
/// Acquisitions that found the lock busy at first and had to wait (or gave up at once).
pub(crate) const CONTENDED: &str = "distlock_contended_total";
/// Seconds an acquisition waited, by outcome.
pub(crate) const WAIT_SECONDS: &str = "distlock_wait_seconds";
/// Seconds a lock was held, from its grant (after any wait) to release or loss.
pub(crate) const HOLD_SECONDS: &str = "distlock_hold_seconds";
/// Waiter wake-ups, by what woke them (`message`: a release or hand-off published on the
/// lock's channel; `ttl`: the holder's remaining lease ran out with no message, as when a
/// holder died or a message was missed). The periodic retry of a long wait and the end of
/// a wait are no wake-ups.
pub(crate) const WAKEUPS: &str = "distlock_wakeups_total";
/// Watchdog renewals that Redis confirmed (and successful `extend` calls).
pub(crate) const RENEWALS: &str = "distlock_renewals_total";
/// Renewals that got no answer from Redis (the lock is not lost yet: its lease decides).
pub(crate) const RENEWAL_FAILURES: &str = "distlock_renewal_failures_total";
/// Holds that were lost (found deleted, expired or taken over, or their lease ran out).
pub(crate) const LOST: &str = "distlock_lost_total";
/// Hand-offs whose claim ran out before this client extended it (see SAFETY.md, liveness):
/// the waiter went on waiting, or its hold, if its acquisition had answered, was lost.
pub(crate) const CLAIMS_MISSED: &str = "distlock_claims_missed_total";
/// Locks this process holds right now.
pub(crate) const HELD: &str = "distlock_held";

/// Describes every series to the installed recorder (Prometheus' `# HELP` lines). Called
/// by each client's start: a recorder installed before any client was built hears it.
pub(super) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_counter!(
            ACQUISITIONS,
            "Lock acquisitions (not re-entries) by outcome: acquired, timeout, unavailable"
        );
        describe_counter!(
            CONTENDED,
            "Acquisitions that found the lock busy at their first attempt"
        );
        describe_histogram!(
            WAIT_SECONDS,
            Unit::Seconds,
            "Time an acquisition waited, by outcome"
        );
        describe_histogram!(
            HOLD_SECONDS,
            Unit::Seconds,
            "Time a lock was held, from its grant to its release or loss"
        );
        describe_counter!(
            WAKEUPS,
            "Waiter wake-ups: by=message (a release or hand-off message), by=ttl (the \
             holder's lease ran out without a message)"
        );
        describe_counter!(RENEWALS, "Lease renewals that Redis confirmed");
        describe_counter!(RENEWAL_FAILURES, "Lease renewals that Redis did not answer");
        describe_counter!(
            LOST,
            "Holds lost: deleted, expired, taken over or force-released"
        );
        describe_counter!(
            CLAIMS_MISSED,
            "Hand-offs whose claim ran out before this client extended it"
        );
        describe_gauge!(HELD, "Locks this process holds now");
    }
}

/// What `event` counts: the series it moves, labelled `label`. Events that no series
/// counts record nothing.
pub(super) fn observe(label: &MetricsLabel, event: &Event<'_>) {
    #[cfg(feature = "metrics")]
    match *event {
        Event::AcquisitionEnded {
            result,
            waited,
            contended,
        } => acquisition(label, result, waited, contended),
        Event::Woken { by } => record::counter(WAKEUPS, label, Some(("by", by))).increment(1),
        Event::GrantMissed | Event::GrantSuperseded | Event::ClaimMissed => {
            record::counter(CLAIMS_MISSED, label, None).increment(1);
        }
        Event::HoldStarted => record::gauge(HELD, label).increment(1.0),
        Event::Renewed { .. } => record::counter(RENEWALS, label, None).increment(1),
        Event::RenewalFailed { .. } => {
            record::counter(RENEWAL_FAILURES, label, None).increment(1);
        }
        Event::Lost { .. } => record::counter(LOST, label, None).increment(1),
        Event::HoldEnded { held_for, .. } => {
            record::gauge(HELD, label).decrement(1.0);
            record::histogram(HOLD_SECONDS, label, None).record(held_for.as_secs_f64());
        }
        Event::Attempt { .. }
        | Event::GaveUp { .. }
        | Event::Acquired { .. }
        | Event::Reentered
        | Event::Answered { .. }
        | Event::Released { .. } => {}
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (label, event);
}

/// An acquisition ended: records its outcome, wait and contention. Invalid input and
/// errors other than a timeout or an outage are not counted.
#[cfg(feature = "metrics")]
fn acquisition(
    label: &MetricsLabel,
    result: Result<(), &LockError>,
    waited: Duration,
    contended: bool,
) {
    let outcome = match result {
        Ok(()) => "acquired",
        Err(e) if e.is_wait_timeout() => "timeout",
        Err(e) if e.is_unavailable() => "unavailable",
        Err(_) => return,
    };
    let outcome = Some(("outcome", outcome));
    record::counter(ACQUISITIONS, label, outcome).increment(1);
    record::histogram(WAIT_SECONDS, label, outcome).record(waited.as_secs_f64());
    if contended {
        record::counter(CONTENDED, label, None).increment(1);
    }
}

/// Registration with the current recorder, as the `metrics` macros do, but with the keys of
/// the default family made once: most locks are recorded under it, and a key with static
/// labels costs no allocation per call (the macros build a `Vec` of labels every time, even
/// with no recorder installed).
#[cfg(feature = "metrics")]
mod record {
    use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata};

    use super::{MetricsLabel, DEFAULT_LABEL, LABEL};

    /// A label besides the family: its name and value.
    type Extra = Option<(&'static str, &'static str)>;

    static METADATA: Metadata<'static> =
        Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

    pub(super) fn counter(name: &'static str, label: &MetricsLabel, extra: Extra) -> Counter {
        let key = key(name, label, extra);
        metrics::with_recorder(|recorder| recorder.register_counter(&key, &METADATA))
    }

    pub(super) fn gauge(name: &'static str, label: &MetricsLabel) -> Gauge {
        let key = key(name, label, None);
        metrics::with_recorder(|recorder| recorder.register_gauge(&key, &METADATA))
    }

    pub(super) fn histogram(name: &'static str, label: &MetricsLabel, extra: Extra) -> Histogram {
        let key = key(name, label, extra);
        metrics::with_recorder(|recorder| recorder.register_histogram(&key, &METADATA))
    }

    /// `name` labelled by `family` and `extra`.
    fn key(name: &'static str, label: &MetricsLabel, extra: Extra) -> Key {
        if let Some(labels) = default_labels(label, extra) {
            return Key::from_static_parts(name, labels);
        }
        let label = Label::new(LABEL, label.clone());
        let extra = extra.map(|(key, value)| Label::from_static_parts(key, value));
        Key::from_parts(name, [label].into_iter().chain(extra).collect::<Vec<_>>())
    }

    /// The labels of the default family with `extra`, if it is one of the labels used.
    fn default_labels(label: &MetricsLabel, extra: Extra) -> Option<&'static [Label]> {
        const TEMPLATE: Label = Label::from_static_parts(LABEL, DEFAULT_LABEL);
        static ALONE: [Label; 1] = [TEMPLATE];
        static WITH: [[Label; 2]; 5] = [
            [TEMPLATE, Label::from_static_parts("outcome", "acquired")],
            [TEMPLATE, Label::from_static_parts("outcome", "timeout")],
            [TEMPLATE, Label::from_static_parts("outcome", "unavailable")],
            [TEMPLATE, Label::from_static_parts("by", "message")],
            [TEMPLATE, Label::from_static_parts("by", "ttl")],
        ];
        if label != DEFAULT_LABEL {
            return None;
        }
        let Some((key, value)) = extra else {
            return Some(&ALONE);
        };
        let matches = |labels: &&[Label; 2]| labels[1].key() == key && labels[1].value() == value;
        WITH.iter().find(matches).map(|labels| &labels[..])
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The static keys are the ones the macros would build, and cover every label used.
        #[test]
        fn default_label_keys_are_static_and_the_same() {
            let label = MetricsLabel::Borrowed(DEFAULT_LABEL);
            for extra in [
                None,
                Some(("outcome", "acquired")),
                Some(("outcome", "timeout")),
                Some(("outcome", "unavailable")),
                Some(("by", "message")),
                Some(("by", "ttl")),
            ] {
                assert!(default_labels(&label, extra).is_some(), "{extra:?}");
                let mut labels = vec![Label::new(LABEL, DEFAULT_LABEL)];
                labels.extend(extra.map(|(k, v)| Label::new(k, v)));
                assert_eq!(key("m", &label, extra), Key::from_parts("m", labels));
            }
            assert!(default_labels(&MetricsLabel::Borrowed("item_<id>"), None).is_none());
        }
    }
}
