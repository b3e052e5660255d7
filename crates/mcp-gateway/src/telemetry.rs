//! Logging and traces: a `tracing` subscriber on stderr, human-readable or JSON, filtered by
//! `RUST_LOG` when set, else `telemetry.log_level`; and, when a collector is configured,
//! OpenTelemetry spans exported over OTLP/HTTP (protobuf) by the official SDK (`mcp_router`'s
//! `telemetry` module makes the spans).
//!
//! Nothing secret is logged or exported by the gateway: tokens, secrets and request bodies never
//! appear; the access log line has the HTTP method, path, MCP method, tool or prompt, virtual host
//! (once routed), status and latency.
//!
//! The standard OpenTelemetry variables win over the `[telemetry]` keys, as `RUST_LOG` wins over
//! `telemetry.log_level`: `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (and
//! the exporter's other `OTEL_EXPORTER_OTLP_*` variables: headers, timeout), `OTEL_SERVICE_NAME`,
//! `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`; `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none` turn traces off.

use std::io::IsTerminal;

use opentelemetry::global;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::field::{Field, Visit};
use tracing::span::Record;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, reload};

use crate::config::{LogFormat, TelemetryConfig};

/// The values of `telemetry.traces_sampler` (the names of `OTEL_TRACES_SAMPLER`).
pub(crate) const SAMPLERS: &[&str] = &[
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
];

/// Why [`init_tracing`] could not install logging or traces.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// `RUST_LOG` (when set) or `telemetry.log_level` is not a valid filter.
    #[error("{setting}: {message}")]
    Filter {
        /// `RUST_LOG` or `telemetry.log_level`.
        setting: &'static str,
        /// Why the filter does not parse.
        message: String,
    },
    /// A global subscriber is already installed.
    #[error("cannot install the log subscriber: {0}")]
    Subscriber(String),
    /// The standard variables ask for an OTLP protocol this build does not export.
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL `{0}`: this build exports \"http/protobuf\" only")]
    Protocol(String),
    /// The OTLP span exporter cannot be built.
    #[error("cannot build the OTLP span exporter: {0}")]
    Exporter(String),
}

/// What [`init_tracing`] installed; dropping it flushes and stops the span exporter.
#[must_use = "dropping it stops exporting spans"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// Replaces the log filter; `None` when `RUST_LOG` set it (it wins over the configuration).
    log_filter: Option<FilterSetter>,
}

/// Replaces the installed subscriber's filter.
type FilterSetter = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("exports_traces", &self.exports_traces())
            .field("log_level_reloadable", &self.log_filter.is_some())
            .finish()
    }
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exports_traces(&self) -> bool {
        self.provider.is_some()
    }

    /// Filters the log from now on by `level` (`telemetry.log_level` syntax, e.g. `debug` or
    /// `info,mcp_router=debug`): a reload's new level. `Ok(false)` when `RUST_LOG` set the filter
    /// at start, which wins over the configuration, so nothing changed.
    ///
    /// # Errors
    ///
    /// [`TelemetryError::Filter`] for a level that does not parse (the filter stays).
    pub fn set_log_level(&self, level: &str) -> Result<bool, TelemetryError> {
        let Some(set) = &self.log_filter else {
            return Ok(false);
        };
        let filter = EnvFilter::builder()
            .parse(level)
            .map_err(|e| TelemetryError::Filter {
                setting: "telemetry.log_level",
                message: e.to_string(),
            })?;
        set(filter).map_err(|message| TelemetryError::Filter {
            setting: "telemetry.log_level",
            message,
        })?;
        Ok(true)
    }
}

/// The setter of a reloadable filter's handle.
fn filter_setter<S: 'static>(handle: reload::Handle<EnvFilter, S>) -> FilterSetter {
    Box::new(move |filter| handle.reload(filter).map_err(|e| e.to_string()))
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!(error = %e, "could not flush the last spans");
        }
    }
}

/// Installs the global `tracing` subscriber described by `config` (`RUST_LOG` overrides
/// `telemetry.log_level`) and, when an OTLP endpoint is configured, the OpenTelemetry tracer
/// provider, the W3C trace context propagator and the router's spans. Call it outside an async
/// runtime: the exporter's blocking HTTP client owns a runtime of its own.
///
/// # Errors
///
/// An invalid filter, a subscriber already installed, or an exporter that cannot be built.
pub fn init_tracing(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
    let rust_log = std::env::var("RUST_LOG").is_ok_and(|directives| !directives.trim().is_empty());
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::builder()
            .parse(&directives)
            .map_err(|e| TelemetryError::Filter {
                setting: "RUST_LOG",
                message: e.to_string(),
            })?,
        _ => EnvFilter::builder()
            .parse(&config.log_level)
            .map_err(|e| TelemetryError::Filter {
                setting: "telemetry.log_level",
                message: e.to_string(),
            })?,
    };
    // A reload may set another level (Telemetry::set_log_level), unless RUST_LOG set the filter:
    // then the filter is installed without the reload layer (its lock on every span event).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match (config.log_format, rust_log) {
        (LogFormat::Json, false) => {
            let builder = builder
                .fmt_fields(TraceIdFields)
                .event_format(TraceIdJson::new())
                .with_filter_reloading();
            let setter = filter_setter(builder.reload_handle());
            builder.try_init().map(|()| Some(setter))
        }
        (LogFormat::Json, true) => builder
            .fmt_fields(TraceIdFields)
            .event_format(TraceIdJson::new())
            .try_init()
            .map(|()| None),
        (LogFormat::Pretty, false) => {
            let builder = builder
                .with_target(false)
                .with_ansi(std::io::stderr().is_terminal())
                .with_filter_reloading();
            let setter = filter_setter(builder.reload_handle());
            builder.try_init().map(|()| Some(setter))
        }
        (LogFormat::Pretty, true) => builder
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init()
            .map(|()| None),
    };
    let log_filter = result.map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
    let provider = tracer_provider(config)?;
    if let Some(provider) = &provider {
        global::set_text_map_propagator(TraceContextPropagator::new());
        global::set_tracer_provider(provider.clone());
        mcp_router::telemetry::enable_tracing();
        tracing::info!("exporting traces over OTLP/HTTP");
    }
    Ok(Telemetry {
        provider,
        log_filter,
    })
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The tracer provider, `None` when traces are off (no endpoint, or turned off by the standard
/// variables).
fn tracer_provider(config: &TelemetryConfig) -> Result<Option<SdkTracerProvider>, TelemetryError> {
    let env_endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    if disabled || (!env_endpoint && config.otlp_endpoint.is_none()) {
        return Ok(None);
    }
    if let Some(protocol) =
        env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        && protocol != "http/protobuf"
    {
        return Err(TelemetryError::Protocol(protocol));
    }
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    // The variables win: the exporter reads them itself unless an endpoint is set in code.
    if !env_endpoint && let Some(base) = &config.otlp_endpoint {
        exporter = exporter.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    let exporter = exporter
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let mut resource = Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(config.service_name.clone());
    }
    let mut provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build());
    // Without the variable the SDK's default (parent-based, always on) would ignore the key.
    if env("OTEL_TRACES_SAMPLER").is_none() {
        let ratio = env("OTEL_TRACES_SAMPLER_ARG")
            .and_then(|arg| arg.parse::<f64>().ok())
            .or_else(|| config.traces_sampler_arg.as_deref()?.parse().ok())
            .unwrap_or(1.0);
        provider = provider.with_sampler(sampler(&config.traces_sampler, ratio));
    }
    Ok(Some(provider.build()))
}

/// The sampler a `traces_sampler` name stands for (validated when the config was built).
fn sampler(name: &str, ratio: f64) -> Sampler {
    match name {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio),
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
        }
        _ => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
    }
}

/// The span field formatter of the JSON format: of a span's fields it keeps only `trace_id`
/// (the `request` span's, see `service`), so the fields of the span every request opens are
/// otherwise never formatted (formatting them as JSON cost about 4% of the gateway's instructions
/// per proxied `tools/call`). Event fields are the JSON formatter's own business and stay
/// complete.
struct TraceIdFields;

impl<'writer> FormatFields<'writer> for TraceIdFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        let mut visitor = TraceIdVisitor(None);
        fields.record(&mut visitor);
        match visitor.0 {
            Some(trace_id) => writer.write_str(&trace_id),
            None => Ok(()),
        }
    }

    /// A recorded `trace_id` replaces the one before (the router's reading wins over the
    /// header's); other fields are not kept.
    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &Record<'_>,
    ) -> std::fmt::Result {
        let mut visitor = TraceIdVisitor(None);
        fields.record(&mut visitor);
        if let Some(trace_id) = visitor.0 {
            current.fields.clear();
            current.fields.push_str(&trace_id);
        }
        Ok(())
    }
}

/// Finds the `trace_id` field, keeping it only when it is 32 hex digits (it goes into JSON
/// unescaped).
struct TraceIdVisitor(Option<String>);

impl Visit for TraceIdVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "trace_id"
            && value.len() == 32
            && value.bytes().all(|b| b.is_ascii_hexdigit())
        {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// The JSON event format (flattened event fields, no span data) with the `trace_id` of the
/// innermost span of the event that has one as the line's first member: every log line of a
/// request that carries a trace context names its trace.
struct TraceIdJson(Format<Json>);

impl TraceIdJson {
    fn new() -> Self {
        Self(
            tracing_subscriber::fmt::format()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false),
        )
    }
}

impl<S> FormatEvent<S, TraceIdFields> for TraceIdJson
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, TraceIdFields>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let trace_id = ctx.event_scope().and_then(|scope| {
            scope.into_iter().find_map(|span| {
                let extensions = span.extensions();
                extensions
                    .get::<FormattedFields<TraceIdFields>>()
                    .filter(|fields| !fields.fields.is_empty())
                    .map(|fields| fields.fields.clone())
            })
        });
        let Some(trace_id) = trace_id else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) if !rest.starts_with('}') => {
                write!(writer, "{{\"trace_id\":\"{trace_id}\",{rest}")
            }
            _ => writer.write_str(&line),
        }
    }
}
