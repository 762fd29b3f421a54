//! Logs as one JSON object per line with the keys Karpenter's logs use — `level` (upper
//! case), `time` (RFC 3339, UTC), `logger`, `message`, `caller` (debug level only) — followed
//! by the fields of the event and of every enclosing span (`nodepool`, `nodeclaim`,
//! `provider_id`, `reason` ...). Anything parsing upstream's logs parses these.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, prelude::*};

/// The logger name upstream writes.
const LOGGER: &str = "controller";

/// Installs the global subscriber. `level` is `debug`, `info`, `warn` or `error`; anything
/// else falls back to `info`. A `RUST_LOG` variable, when set, overrides it. Calling `init`
/// again is harmless (the first subscriber stays).
pub fn init(level: &str, json: bool) {
    let filter = filter(level);
    let result = if json {
        tracing_subscriber::registry()
            .with(filter)
            .with(json_layer(std::io::stdout))
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(filter)
            .with(tracing_subscriber::fmt::layer().with_target(false))
            .try_init()
    };
    if result.is_err() {
        tracing::debug!("logging was already initialised");
    }
}

/// The level filter: the chosen level for our crates, and no chattier than `info` for the
/// HTTP and TLS stack, whose debug output would drown ours.
pub fn filter(level: &str) -> EnvFilter {
    if let Ok(directives) = std::env::var("RUST_LOG")
        && let Ok(f) = EnvFilter::try_new(directives)
    {
        return f;
    }
    let level = match level {
        "debug" | "info" | "warn" | "error" => level,
        _ => "info",
    };
    let quiet = [
        "hyper",
        "hyper_util",
        "h2",
        "tower",
        "rustls",
        "kube_client",
        "kube_runtime",
    ]
    .iter()
    .map(|c| format!(",{c}={}", if level == "debug" { "info" } else { level }))
    .collect::<String>();
    EnvFilter::new(format!("{level}{quiet}"))
}

/// A fmt layer writing the JSON lines to `writer`.
pub fn json_layer<S, W>(writer: W) -> impl tracing_subscriber::Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .fmt_fields(JsonFields::new())
        .event_format(JsonLine)
        .with_writer(writer)
}

/// The event formatter behind [`json_layer`].
pub struct JsonLine;

impl<S, N> FormatEvent<S, N> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert("level".into(), meta.level().as_str().into());
        line.insert(
            "time".into(),
            k8s_openapi::jiff::Timestamp::now().to_string().into(),
        );
        line.insert("logger".into(), LOGGER.into());
        line.insert("message".into(), Value::String(String::new()));
        if *meta.level() == tracing::Level::DEBUG
            && let (Some(file), Some(l)) = (meta.file(), meta.line())
        {
            line.insert("caller".into(), format!("{file}:{l}").into());
        }
        // Outermost span first, so an inner span's field wins over an outer one's.
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>()
                    && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&fields.fields)
                {
                    line.extend(map);
                }
            }
        }
        event.record(&mut Collect(&mut line));
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// Gathers an event's fields into the line; `message` keeps its reserved key.
struct Collect<'a>(&'a mut Map<String, Value>);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Buffer {
            self.clone()
        }
    }

    fn capture(level: &str, f: impl FnOnce()) -> Vec<Value> {
        let buf = Buffer::default();
        let subscriber = tracing_subscriber::registry()
            .with(EnvFilter::new(level))
            .with(json_layer(buf.clone()));
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buf.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).expect("every line is JSON"))
            .collect()
    }

    #[test]
    fn lines_carry_upstream_keys_and_span_fields() {
        let lines = capture("info", || {
            let span = tracing::info_span!("launch", nodepool = "default");
            let _e = span.enter();
            tracing::info!(
                nodeclaim = "default-x1",
                provider_id = "aws:///a/i-1",
                "launched nodeclaim"
            );
            tracing::debug!("not shown at info");
        });
        assert_eq!(lines.len(), 1);
        let l = &lines[0];
        assert_eq!(l["level"], "INFO");
        assert_eq!(l["logger"], "controller");
        assert_eq!(l["message"], "launched nodeclaim");
        assert_eq!(l["nodepool"], "default");
        assert_eq!(l["nodeclaim"], "default-x1");
        assert_eq!(l["provider_id"], "aws:///a/i-1");
        assert!(l["time"].as_str().unwrap().ends_with('Z'));
        assert!(l.get("caller").is_none());
    }

    #[test]
    fn debug_lines_name_the_caller_and_keep_types() {
        let lines = capture("debug", || {
            tracing::debug!(count = 3, ok = true, "computed");
        });
        let l = &lines[0];
        assert_eq!(l["level"], "DEBUG");
        assert_eq!(l["count"], 3);
        assert_eq!(l["ok"], true);
        assert!(l["caller"].as_str().unwrap().contains("logging.rs:"));
    }

    #[test]
    fn the_level_filter_drops_lower_levels() {
        let lines = capture("error", || {
            tracing::info!("quiet");
            tracing::error!("loud");
        });
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["level"], "ERROR");
    }

    #[test]
    fn unknown_levels_fall_back_to_info() {
        use tracing::level_filters::LevelFilter;
        use tracing_subscriber::Layer;
        if std::env::var_os("RUST_LOG").is_none() {
            let hint = |l: &str| {
                <EnvFilter as Layer<tracing_subscriber::Registry>>::max_level_hint(&filter(l))
            };
            assert_eq!(hint("verbose"), Some(LevelFilter::INFO));
            assert_eq!(hint("debug"), Some(LevelFilter::DEBUG));
            assert_eq!(hint("error"), Some(LevelFilter::ERROR));
        }
    }
}
