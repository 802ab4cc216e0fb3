//! The one place where a lock's lifecycle is observed. `lock/` reports each event of an
//! acquisition or a hold once, as an [`Event`] about a [`Subject`]; [`observe`] feeds it to
//! both sinks, each deciding what the event means to it:
//! - [`spans`]: the `distlock.acquire` and `distlock.hold` spans, their fields and the
//!   events inside them (through `tracing`);
//! - [`metrics`]: the series of the crate's metrics table (through the `metrics` facade).
//!
//! Nothing the sinks emit names a lock unless the client opted in
//! ([`LockClientBuilder::trace_lock_names`](crate::LockClientBuilder::trace_lock_names)):
//! a subject carries the lock's name only then, and its metrics label (a key template)
//! always.

mod metrics;
mod spans;

use std::time::Duration;

use tracing::field::DisplayValue;
use tracing::Span;

use crate::error::LockError;
pub(crate) use crate::observe::metrics::{MetricsLabel, DEFAULT_LABEL};
use crate::protocol::name::LockName;
pub(crate) use spans::{acquire_span, hold_span, outcome};

/// Whom an event is about.
pub(crate) struct Subject<'a> {
    /// The lock's metrics label: the key template its name was made from.
    pub(crate) label: &'a MetricsLabel,
    /// The lock's name, only when the client opted in.
    pub(crate) name: Option<&'a LockName>,
    /// The span the event belongs to: a hold's (a disabled one once the hold ended), or
    /// `None` for the current span (an acquisition's: its attempts run inside it).
    pub(crate) span: Option<Span>,
}

impl<'a> Subject<'a> {
    /// The subject of the lock `name` (if known) labelled `label`, in `span` (`None`: the
    /// current one); `names` says whether the client opted in to lock names.
    pub(crate) fn new(
        label: &'a MetricsLabel,
        name: impl Into<Option<&'a LockName>>,
        names: bool,
        span: Option<Span>,
    ) -> Self {
        Self {
            label,
            name: name.into().filter(|_| names),
            span,
        }
    }

    /// The span the event belongs to.
    fn span(&self) -> Span {
        self.span.clone().unwrap_or_else(Span::current)
    }
}

/// One event of a lock's lifecycle, from the request to the end of its hold.
// Some fields are the metrics' alone.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) enum Event<'a> {
    /// An acquisition sends its `attempts`-th call of the acquire function.
    Attempt { attempts: u64 },
    /// A waiter woke up, `by` a `"message"` (a release or hand-off published on the lock's
    /// channel) or the holder's `"ttl"` (its lease ran out with no message).
    Woken { by: &'static str },
    /// A waiter's grant whose claim ran out before it was read: it waits on.
    GrantMissed,
    /// A grant read after a later holder was seen: its claim ran out unread.
    GrantSuperseded,
    /// An acquisition gave up: the lock stayed busy until the end of its wait.
    GaveUp {
        waited: Duration,
        attempts: u64,
        /// The holder's remaining lease at the last attempt, if it had one.
        holder_ttl: Option<Duration>,
    },
    /// An acquisition took the lock; `woken` says what woke it last (`"grant"`: handed
    /// over by its previous holder's release message).
    Acquired {
        owner: &'a str,
        token: u64,
        waited: Duration,
        attempts: u64,
        woken: Option<&'static str>,
    },
    /// A request re-entered a hold of its scope: nothing was asked of Redis.
    Reentered,
    /// An acquisition in Redis ended (not a re-entry, nor a request refused before its
    /// first attempt), `contended` when an attempt found the lock busy.
    AcquisitionEnded {
        result: Result<(), &'a LockError>,
        waited: Duration,
        contended: bool,
    },
    /// A request was answered (re-entries and refusals included), with its
    /// [`outcome`] after `waited`.
    Answered {
        outcome: &'static str,
        waited: Duration,
    },
    /// A hold began: granted in Redis, not re-entered.
    HoldStarted,
    /// Redis confirmed a renewal (or an extension) of the hold, for `ttl`.
    Renewed { ttl: Duration },
    /// A renewal Redis did not answer; `first` of a run of them.
    RenewalFailed { first: bool },
    /// The hold was lost, for `reason`.
    Lost { reason: &'static str },
    /// A handed-over hold's claim ran out before its client extended it.
    ClaimMissed,
    /// The hold was deleted in Redis by its owner, after `held_for`.
    Released { owner: &'a str, held_for: Duration },
    /// The hold ended (released, lost, or dropped without a release), after `held_for`:
    /// once per hold.
    HoldEnded {
        lost: Option<&'static str>,
        released: bool,
        held_for: Duration,
    },
}

/// Observes `event` about `about`: the one call through which `lock/` reports it.
pub(crate) fn observe(about: Subject<'_>, event: Event<'_>) {
    metrics::observe(about.label, &event);
    spans::observe(&about, &event);
}

/// A lock's name as a field of a log event: present only when the client opted in to lock
/// names (`names`). For events outside a lock's lifecycle (an outage, an operator's force
/// release, a job, an election…): those of the lifecycle go through [`observe`].
pub(crate) fn name(name: &LockName, names: bool) -> Option<DisplayValue<&LockName>> {
    names.then(|| tracing::field::display(name))
}

/// A lock error's text as a field of a log event: it begins with the lock's name, so it is
/// present only when the client opted in to lock names (`names`). Log
/// [`LockError::class`] beside it: that is always there.
pub(crate) fn error(error: &LockError, names: bool) -> Option<DisplayValue<&LockError>> {
    names.then(|| tracing::field::display(error))
}

/// Describes every series to the installed recorder (Prometheus' `# HELP` lines).
pub(crate) fn describe() {
    metrics::describe();
}
