//! Spans in tests: a `tracing-subscriber` layer that keeps every span (name, fields as
//! recorded so far, parent, closed or not) and the events inside them, installed once per
//! test binary as the global subscriber. Give each test its own metrics label (the spans'
//! `distlock.lock.template`), and parallel tests never read each other's spans.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::{Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// One span as captured.
#[derive(Clone, Debug)]
pub struct CapturedSpan {
    /// Its place in the store: [`CapturedSpan::parent`] refers to it.
    pub index: usize,
    pub name: &'static str,
    pub parent: Option<usize>,
    /// Field values as recorded (strings without quotes, numbers and booleans as printed).
    pub fields: BTreeMap<String, String>,
    pub closed: bool,
    pub events: Vec<CapturedEvent>,
}

/// One event inside a span.
#[derive(Clone, Debug)]
pub struct CapturedEvent {
    pub level: Level,
    pub message: String,
    pub fields: BTreeMap<String, String>,
}

impl CapturedSpan {
    /// A field's value, if it was recorded.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// A numeric field's value.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.field(key).and_then(|v| v.parse().ok())
    }
}

fn store() -> &'static Mutex<Vec<CapturedSpan>> {
    static STORE: Mutex<Vec<CapturedSpan>> = Mutex::new(Vec::new());
    &STORE
}

fn with_store<T>(f: impl FnOnce(&mut Vec<CapturedSpan>) -> T) -> T {
    f(&mut store().lock().unwrap_or_else(PoisonError::into_inner))
}

/// The store index of a span, kept in its registry extensions.
struct Index(usize);

/// Field values into a map.
struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// The capture layer.
struct Capture;

impl<S> Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let index = with_store(|spans| {
            let index = spans.len();
            spans.push(CapturedSpan {
                index,
                name: attrs.metadata().name(),
                parent,
                fields,
                closed: false,
                events: Vec::new(),
            });
            index
        });
        span.extensions_mut().insert(Index(index));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(index) = index_of(&ctx, id) {
            with_store(|spans| values.record(&mut Fields(&mut spans[index].fields)));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let Some(index) = span.extensions().get::<Index>().map(|i| i.0) else {
            return;
        };
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        let level = *event.metadata().level();
        with_store(|spans| {
            spans[index].events.push(CapturedEvent {
                level,
                message,
                fields,
            })
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(index) = index_of(&ctx, &id) {
            with_store(|spans| spans[index].closed = true);
        }
    }
}

fn index_of<S: Subscriber + for<'a> LookupSpan<'a>>(
    ctx: &Context<'_, S>,
    id: &Id,
) -> Option<usize> {
    let span = ctx.span(id)?;
    let index = span.extensions().get::<Index>().map(|i| i.0);
    index
}

/// Installs the capture layer (at INFO and above: the spans and the warnings) as this
/// binary's global subscriber, once.
pub fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let subscriber =
            tracing_subscriber::registry().with(Capture.with_filter(LevelFilter::INFO));
        tracing::subscriber::set_global_default(subscriber)
            .expect("the only subscriber of this binary");
    });
}

/// Every span captured so far.
pub fn spans() -> Vec<CapturedSpan> {
    with_store(|spans| spans.clone())
}

/// The spans named `name` whose `key` field is `value`, in creation order.
pub fn find(name: &str, key: &str, value: &str) -> Vec<CapturedSpan> {
    let all = spans();
    all.into_iter()
        .filter(|s| s.name == name && s.field(key) == Some(value))
        .collect()
}

/// A captured span by index.
pub fn span(index: usize) -> CapturedSpan {
    with_store(|spans| spans[index].clone())
}

/// The tree under `root` as text: each span with its fields, its events indented below it.
pub fn tree(root: usize) -> String {
    let all = spans();
    let mut out = String::new();
    render(&all, root, 0, &mut out);
    out
}

fn render(all: &[CapturedSpan], index: usize, depth: usize, out: &mut String) {
    let span = &all[index];
    let pad = "  ".repeat(depth);
    let fields: Vec<String> = span
        .fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(out, "{pad}{} {{{}}}", span.name, fields.join(" "));
    for event in &span.events {
        let fields: Vec<String> = event
            .fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(
            out,
            "{pad}  · {} {} {}",
            event.level,
            event.message,
            fields.join(" ")
        );
    }
    for child in all.iter().filter(|s| s.parent == Some(index)) {
        render(all, child.index, depth + 1, out);
    }
}
