//! `upstream_headers`: adds headers and `_meta` entries to the upstream request.
//!
//! ```toml
//! [[plugins]]
//! name = "caller-identity"
//! kind = "upstream_headers"
//! conditions = { backends = ["billing"] }
//! [plugins.config.headers]
//! x-caller = "{subject}"
//! x-gateway-vhost = "{virtual_host}"
//! [plugins.config.meta]
//! "example.com/caller" = "{subject}@{issuer}"
//! "example.com/tier" = { level = 2 }
//! ```
//!
//! Placeholders in header values and in `_meta` string values: `{subject}`, `{issuer}` (empty
//! without a principal), `{virtual_host}`, `{backend}`, `{name}` (upstream name). A header whose
//! rendered value is not a valid header value is left out (logged). Headers that carry the
//! protocol or the transport (`host`, `content-length`, `content-type`, `transfer-encoding`,
//! `connection`, `mcp-*`) cannot be set.

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{ConfigError, HookSet, Plugin, PluginConfig, PluginContext, UpstreamExtras, Verdict};

/// The kind name.
pub const KIND: &str = "upstream_headers";

const PLACEHOLDERS: [&str; 5] = [
    "{subject}",
    "{issuer}",
    "{virtual_host}",
    "{backend}",
    "{name}",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    meta: BTreeMap<String, Value>,
}

/// The `upstream_headers` plugin.
#[derive(Debug)]
pub struct UpstreamHeaders {
    headers: Vec<(HeaderName, Template)>,
    meta: Vec<(String, MetaValue)>,
}

#[derive(Debug)]
enum MetaValue {
    Fixed(Box<RawValue>),
    Template(Template),
}

/// A value with placeholders; `Fixed` when it has none (rendered once).
#[derive(Debug)]
enum Template {
    Fixed(String),
    Dynamic(String),
}

impl Template {
    fn new(text: &str) -> Self {
        if PLACEHOLDERS.iter().any(|p| text.contains(p)) {
            Template::Dynamic(text.to_owned())
        } else {
            Template::Fixed(text.to_owned())
        }
    }

    fn render(&self, ctx: &PluginContext<'_>) -> std::borrow::Cow<'_, str> {
        match self {
            Template::Fixed(s) => std::borrow::Cow::Borrowed(s),
            Template::Dynamic(s) => {
                let values = [
                    ctx.principal.map_or("", |p| p.subject()),
                    ctx.principal.map_or("", |p| p.issuer()),
                    ctx.virtual_host,
                    ctx.backend,
                    ctx.name,
                ];
                let mut out = s.clone();
                for (placeholder, value) in PLACEHOLDERS.iter().zip(values) {
                    out = out.replace(placeholder, value);
                }
                std::borrow::Cow::Owned(out)
            }
        }
    }
}

impl UpstreamHeaders {
    /// Builds the plugin from its `config` table.
    pub fn from_config(config: &PluginConfig<'_>) -> Result<Self, ConfigError> {
        let c: Config = config.parse()?;
        if c.headers.is_empty() && c.meta.is_empty() {
            return Err(config.error("set `headers`, `meta` or both"));
        }
        let mut headers = Vec::new();
        for (name, value) in &c.headers {
            let path = format!("headers.{name}");
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| config.error_at(&path, "not a valid header name"))?;
            let lower = header.as_str();
            if matches!(
                lower,
                "host" | "content-length" | "content-type" | "transfer-encoding" | "connection"
            ) || lower.starts_with("mcp-")
            {
                return Err(config.error_at(&path, "this header cannot be set by a plugin"));
            }
            let probe = PLACEHOLDERS
                .iter()
                .fold(value.clone(), |v, p| v.replace(p, "x"));
            HeaderValue::from_str(&probe)
                .map_err(|_| config.error_at(&path, "not a valid header value"))?;
            headers.push((header, Template::new(value)));
        }
        let mut meta = Vec::new();
        for (key, value) in c.meta {
            let entry = match value {
                Value::String(s) if PLACEHOLDERS.iter().any(|p| s.contains(p)) => {
                    MetaValue::Template(Template::new(&s))
                }
                other => MetaValue::Fixed(
                    serde_json::value::to_raw_value(&other)
                        .map_err(|e| config.error_at(&format!("meta.{key}"), e.to_string()))?,
                ),
            };
            meta.push((key, entry));
        }
        Ok(Self { headers, meta })
    }
}

impl Plugin for UpstreamHeaders {
    fn hooks(&self) -> HookSet {
        HookSet::PRE
    }

    fn call<'a>(&'a self, _: &'a PluginContext<'a>, _: Option<&'a RawValue>) -> Verdict<'a> {
        Verdict::allow()
    }

    fn upstream(&self, ctx: &PluginContext<'_>, extras: &mut UpstreamExtras) {
        for (name, template) in &self.headers {
            match HeaderValue::from_str(&template.render(ctx)) {
                Ok(value) => {
                    extras.headers.insert(name.clone(), value);
                }
                Err(_) => {
                    tracing::warn!(header = %name, "upstream header left out: the rendered value is not a valid header value");
                }
            }
        }
        for (key, value) in &self.meta {
            let raw = match value {
                MetaValue::Fixed(raw) => raw.clone(),
                MetaValue::Template(t) => match serde_json::value::to_raw_value(&*t.render(ctx)) {
                    Ok(raw) => raw,
                    Err(_) => continue,
                },
            };
            extras.meta.retain(|(k, _)| k != key);
            extras.meta.push((key.clone(), raw));
        }
    }

    fn adds_upstream(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Hook;
    use mcp_core::Principal;

    #[test]
    fn renders_headers_and_meta() {
        let config = serde_json::json!({
            "headers": {"X-Caller": "{subject}", "x-static": "on"},
            "meta": {"example.com/caller": "{subject}@{issuer}", "example.com/tier": {"level": 2}}
        });
        let plugin =
            UpstreamHeaders::from_config(&PluginConfig::new("h", Some(&config))).expect("valid");
        let alice = Principal::new("iss", "alice");
        let ctx =
            PluginContext::new(Hook::ToolPreInvoke, "vh", "b", "t").with_principal(Some(&alice));
        let mut extras = UpstreamExtras::default();
        plugin.upstream(&ctx, &mut extras);
        assert_eq!(extras.headers["x-caller"], "alice");
        assert_eq!(extras.headers["x-static"], "on");
        let meta: Vec<(&str, &str)> = extras
            .meta
            .iter()
            .map(|(k, v)| (k.as_str(), v.get()))
            .collect();
        assert_eq!(
            meta,
            [
                ("example.com/caller", r#""alice@iss""#),
                ("example.com/tier", r#"{"level":2}"#)
            ]
        );
        let params =
            RawValue::from_string(r#"{"name":"t","_meta":{"a":1}}"#.to_owned()).expect("json");
        let merged = extras.merge_meta(&params).expect("merged");
        let merged: Value = serde_json::from_str(merged.get()).expect("json");
        assert_eq!(merged["_meta"]["a"], 1);
        assert_eq!(merged["_meta"]["example.com/tier"]["level"], 2);
    }

    #[test]
    fn refuses_protocol_headers() {
        for name in ["mcp-session-id", "Host", "content-length"] {
            let config = serde_json::json!({"headers": {name: "x"}});
            let err = UpstreamHeaders::from_config(&PluginConfig::new("h", Some(&config)))
                .expect_err("refused");
            assert_eq!(
                err.to_string(),
                format!("plugins[0].config.headers.{name}: this header cannot be set by a plugin")
            );
        }
    }
}
