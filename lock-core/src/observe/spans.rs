//! The spans sink: what an [`Event`] means to the spans and events through `tracing`,
//! shaped as OpenTelemetry's semantic conventions shape theirs: dot-separated, lower-case
//! names in the `distlock` namespace, snake_case words, durations in seconds. Any subscriber reads them; `tracing-opentelemetry` exports them as
//! OpenTelemetry spans (the operating guide shows how).
//!
//! Two spans, at INFO (one of each per use of a lock, as a request span per request; a
//! filter at WARN keeps only the failures):
//! - `distlock.acquire`: one acquisition, from the request to the grant or the error;
//! - `distlock.hold`: one hold, from the grant to its release or loss. It is kept in the
//!   hold, never entered across the user's `.await`s, and closed when the hold ends.
//!
//! Events at WARN inside the hold span: `distlock.hold.lost` (with the reason: an operator's
//! force release, an expired lease…), `distlock.renewal.failed` (the first of a run of
//! renewals Redis did not answer; the rest at DEBUG), `distlock.claim.missed` (a hand-off
//! whose claim ran out). Both spans are parented to the span current where the request was
//! awaited (a request's span under `lock-tower`), the hold as the acquisition's sibling.
//!
//! Lock names are not attributes unless the client opts in
//! ([`LockClientBuilder::trace_lock_names`](crate::LockClientBuilder::trace_lock_names)):
//! the metrics label (a key template) stands for them, as in the metrics.
//!
//! The keys below are part of the public contract: renaming one is a breaking change.

use tracing::field::Empty;
use tracing::Span;

use crate::error::LockError;
use crate::observe::{Event, MetricsLabel, Subject};
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::LockName;

/// The lock's name, only when the client opted in.
const NAME: &str = "distlock.lock.name";
/// How an acquisition ended: see [`outcome`].
const OUTCOME: &str = "distlock.acquire.outcome";
/// Seconds the acquisition took, waiting included.
const WAIT_DURATION: &str = "distlock.acquire.wait_duration";
/// Calls of the acquire function the acquisition made.
const ATTEMPTS: &str = "distlock.acquire.attempts";
/// True when the lock was handed over by its previous holder's release message (a grant
/// to this queued waiter), false when an attempt took it.
const HANDED_OVER: &str = "distlock.acquire.handed_over";
/// How a hold ended: `released`, `lost`, or `dropped` (its client went without a release).
const END: &str = "distlock.hold.end";
/// Why a hold was lost.
const LOSS_REASON: &str = "distlock.hold.loss_reason";
/// `ERROR` on an acquisition that failed other than by waiting its time out, and on a
/// lost hold: `tracing-opentelemetry` sets the OpenTelemetry span status from it.
const STATUS: &str = "otel.status_code";

/// The span of one acquisition of `name`, a child of `parent`.
pub(crate) fn acquire_span(
    parent: &Span,
    name: &LockName,
    kind: LockMode,
    label: &MetricsLabel,
    names: bool,
) -> Span {
    let span = tracing::info_span!(parent: parent, "distlock.acquire",
        distlock.lock.kind = kind.as_str(),
        distlock.lock.template = &**label,
        distlock.lock.name = Empty,
        distlock.acquire.outcome = Empty,
        distlock.acquire.wait_duration = Empty,
        distlock.acquire.attempts = Empty,
        distlock.acquire.handed_over = Empty,
        otel.status_code = Empty,
    );
    if names {
        span.record(NAME, tracing::field::display(name));
    }
    span
}

/// How an acquisition ended, from its result: `acquired`, `reentered` (a hold of the
/// caller's scope, nothing asked of Redis), `timeout` (still busy at the end of the wait),
/// `unavailable` (Redis could not be reached), `error` (anything else: refused, invalid…).
pub(crate) fn outcome<T>(result: &Result<T, LockError>, reentered: bool) -> &'static str {
    match result {
        Ok(_) if reentered => "reentered",
        Ok(_) => "acquired",
        Err(e) if e.is_wait_timeout() => "timeout",
        Err(e) if e.is_unavailable() => "unavailable",
        Err(_) => "error",
    }
}

/// What `event` means to the spans: a field recorded on its subject's span, or an event
/// inside it. Every event carries the template, and the lock's name only when the client
/// opted in.
pub(super) fn observe(about: &Subject<'_>, event: &Event<'_>) {
    let template = &**about.label;
    let name = about.name.map(tracing::field::display);
    match *event {
        Event::Attempt { attempts } => {
            about.span().record(ATTEMPTS, attribute_int(attempts));
        }
        Event::GrantMissed | Event::ClaimMissed => {
            tracing::warn!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, "distlock.claim.missed");
        }
        Event::GrantSuperseded => {
            tracing::debug!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, "ignored a superseded grant");
        }
        Event::GaveUp {
            waited,
            attempts,
            holder_ttl,
        } => {
            tracing::debug!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, ?waited, attempts, ?holder_ttl, "gave up waiting");
        }
        Event::Acquired {
            owner,
            token,
            waited,
            attempts,
            woken,
        } => {
            let span = about.span();
            span.record(HANDED_OVER, woken == Some("grant"));
            tracing::debug!(parent: &span, distlock.lock.template = template,
                distlock.lock.name = name, owner, token, ?waited, attempts, woken, "acquired");
        }
        Event::Reentered => {
            tracing::debug!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, "re-entered");
        }
        Event::Answered { outcome, waited } => {
            let span = about.span();
            span.record(OUTCOME, outcome);
            span.record(WAIT_DURATION, waited.as_secs_f64());
            if matches!(outcome, "unavailable" | "error") {
                span.record(STATUS, "ERROR");
            }
        }
        Event::Renewed { ttl } => {
            tracing::trace!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, ?ttl, "renewed");
        }
        // The first of a run at WARN, the next ones at DEBUG (the lease decides whether the
        // hold is lost; a long outage must not log once per tick).
        Event::RenewalFailed { first: true } => {
            tracing::warn!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, "distlock.renewal.failed");
        }
        Event::RenewalFailed { first: false } => {
            tracing::debug!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, "distlock.renewal.failed");
        }
        Event::Lost { reason } => {
            tracing::warn!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, distlock.hold.loss_reason = reason,
                "distlock.hold.lost");
        }
        Event::Released { owner, held_for } => {
            tracing::debug!(parent: &about.span(), distlock.lock.template = template,
                distlock.lock.name = name, owner, ?held_for, "released");
        }
        Event::HoldEnded { lost, released, .. } => hold_ended(&about.span(), lost, released),
        Event::Woken { .. } | Event::AcquisitionEnded { .. } | Event::HoldStarted => {}
    }
}

/// An integer as OpenTelemetry holds it (`i64`): `tracing-opentelemetry` exports a `u64`
/// field as a string. Attempts and fencing tokens (below 2⁵³) always fit.
fn attribute_int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The span of one hold, a child of `parent`, from its grant.
pub(crate) fn hold_span(
    parent: &Span,
    name: &LockName,
    kind: LockMode,
    label: &MetricsLabel,
    token: u64,
    names: bool,
) -> Span {
    let span = tracing::info_span!(parent: parent, "distlock.hold",
        distlock.lock.kind = kind.as_str(),
        distlock.lock.template = &**label,
        distlock.lock.name = Empty,
        distlock.hold.fencing_token = attribute_int(token),
        distlock.hold.end = Empty,
        distlock.hold.loss_reason = Empty,
        otel.status_code = Empty,
    );
    if names {
        span.record(NAME, tracing::field::display(name));
    }
    span
}

/// Records how a hold ended on its span (which closes when its last handle goes).
fn hold_ended(span: &Span, lost: Option<&'static str>, released: bool) {
    match lost {
        Some(reason) => {
            span.record(END, "lost");
            span.record(LOSS_REASON, reason);
            span.record(STATUS, "ERROR");
        }
        None if released => {
            span.record(END, "released");
        }
        None => {
            span.record(END, "dropped");
        }
    }
}
