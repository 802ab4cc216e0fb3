//! lock-core's spans exported through `tracing-opentelemetry`, as the operating guide's
//! "Tracing" shows, to an in-memory exporter (no network): the fields arrive as
//! OpenTelemetry attributes, the hold as the acquisition's sibling, the loss as the status.
//!
//! The OpenTelemetry subscriber is this test's thread's default (a current-thread runtime,
//! so the client's background tasks run on it too); the binary's global subscriber is the
//! capture layer of `spans.rs`.

use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

use distlock_tests::locks::{client, GENEROUS};
use distlock_tests::RedisServer;

/// The attribute `key` of `span`.
fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    let found = span.attributes.iter().find(|kv| kv.key.as_str() == key);
    found.map(|kv| &kv.value)
}

/// The exported span named `name` of the family `template`.
fn exported<'a>(spans: &'a [SpanData], name: &str, template: &str) -> &'a SpanData {
    let template = Value::from(template.to_owned());
    let found = spans
        .iter()
        .find(|s| s.name == name && attribute(s, "distlock.lock.template") == Some(&template));
    found.unwrap_or_else(|| panic!("{name} of {template} in {spans:#?}"))
}

#[tokio::test(flavor = "current_thread")]
async fn spans_export_through_tracing_opentelemetry() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("distlock-tests")));
    let _default = tracing::subscriber::set_default(subscriber);

    let server = RedisServer::start();
    let locks = client(&server.url());
    let request = async {
        let guard = locks
            .lock("otel_1")
            .metrics_label("otel_<n>")
            .await
            .unwrap();
        guard.release().await.unwrap();
    };
    request.instrument(tracing::info_span!("request")).await;
    let guard = locks
        .lock("otel_2")
        .metrics_label("otel_lost")
        .await
        .unwrap();
    let lost = guard.lost();
    assert!(client(&server.url()).force_release("otel_2").await.unwrap());
    tokio::time::timeout(GENEROUS, lost)
        .await
        .expect("told it is lost");
    drop(guard);

    let spans = exporter.get_finished_spans().expect("exported");
    let acquire = exported(&spans, "distlock.acquire", "otel_<n>");
    let outcome = attribute(acquire, "distlock.acquire.outcome");
    assert_eq!(outcome, Some(&Value::from("acquired")));
    assert_eq!(
        attribute(acquire, "distlock.acquire.attempts"),
        Some(&Value::I64(1))
    );
    assert_eq!(attribute(acquire, "distlock.lock.name"), None);
    let hold = exported(&spans, "distlock.hold", "otel_<n>");
    assert_eq!(
        attribute(hold, "distlock.hold.end"),
        Some(&Value::from("released"))
    );
    assert_eq!(hold.status, Status::Unset);
    let request = spans
        .iter()
        .find(|s| s.name == "request")
        .expect("the request");
    for child in [acquire, hold] {
        assert_eq!(child.parent_span_id, request.span_context.span_id());
        assert_eq!(
            child.span_context.trace_id(),
            request.span_context.trace_id()
        );
    }
    let lost = exported(&spans, "distlock.hold", "otel_lost");
    assert_eq!(
        attribute(lost, "distlock.hold.end"),
        Some(&Value::from("lost"))
    );
    assert!(
        matches!(lost.status, Status::Error { .. }),
        "{:?}",
        lost.status
    );
    let event = lost.events.iter().find(|e| e.name == "distlock.hold.lost");
    assert!(event.is_some(), "{:#?}", lost.events);
}
