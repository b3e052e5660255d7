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
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

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
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exports_traces(&self) -> bool {
        self.provider.is_some()
    }
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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match config.log_format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .fmt_fields(NoSpanFields)
            .try_init(),
        LogFormat::Pretty => builder
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
    result.map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
    let provider = tracer_provider(config)?;
    if let Some(provider) = &provider {
        global::set_text_map_propagator(TraceContextPropagator::new());
        global::set_tracer_provider(provider.clone());
        mcp_router::telemetry::enable_tracing();
        tracing::info!("exporting traces over OTLP/HTTP");
    }
    Ok(Telemetry { provider })
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

/// The span field formatter of the JSON format: its lines carry no span data (no current span,
/// no span list), so the fields of the span every request opens are never formatted (formatting
/// them as JSON cost about 4% of the gateway's instructions per proxied `tools/call`). Event
/// fields are the JSON formatter's own business and stay complete.
struct NoSpanFields;

impl<'writer> FormatFields<'writer> for NoSpanFields {
    fn format_fields<R: RecordFields>(
        &self,
        _writer: Writer<'writer>,
        _fields: R,
    ) -> std::fmt::Result {
        Ok(())
    }
}
