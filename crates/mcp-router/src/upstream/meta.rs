//! The `_meta` object sent upstream: synthesised for modern backends, trimmed for legacy ones.

use mcp_core::{ProtocolVersion, RawObject};
use serde_json::value::RawValue;

/// `_meta` key of the request's protocol version (2026-07-28).
pub(crate) const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities (2026-07-28).
pub(crate) const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's implementation info (2026-07-28).
pub(crate) const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of a progress token.
pub(crate) const PROGRESS_TOKEN: &str = "progressToken";
const MODERN_PREFIX: &str = "io.modelcontextprotocol/";

/// `_meta` for a modern backend: the client's `_meta` (log level, trace context and any extension
/// keys pass through) with the protocol version, the client's capabilities, the gateway's
/// `clientInfo` and the gateway's own progress token.
pub(crate) fn modern(
    downstream: Option<&RawValue>,
    client_caps: &RawValue,
    client_info: &RawValue,
    progress_token: Option<&str>,
) -> Box<RawValue> {
    let mut meta = downstream
        .and_then(|raw| RawObject::from_raw(raw).ok())
        .unwrap_or_default();
    meta.set_str(PROTOCOL_VERSION, ProtocolVersion::LATEST.as_str());
    meta.set_borrowed(CLIENT_CAPABILITIES, client_caps);
    meta.set_borrowed(CLIENT_INFO, client_info);
    set_progress(&mut meta, progress_token);
    set_trace_context(&mut meta);
    meta.to_raw()
}

/// `_meta` for a legacy backend: the client's `_meta` without the 2026-07-28 keys, with the
/// gateway's progress token; `None` when nothing is left.
pub(crate) fn legacy(
    downstream: Option<&RawValue>,
    progress_token: Option<&str>,
) -> Option<Box<RawValue>> {
    let mut meta = downstream
        .and_then(|raw| RawObject::from_raw(raw).ok())
        .unwrap_or_default();
    let modern_keys: Vec<String> = meta
        .keys()
        .filter(|k| k.starts_with(MODERN_PREFIX))
        .map(str::to_owned)
        .collect();
    for key in modern_keys {
        meta.remove(&key);
    }
    set_progress(&mut meta, progress_token);
    set_trace_context(&mut meta);
    (meta.keys().next().is_some()).then(|| meta.to_raw())
}

/// With spans on, `traceparent`/`tracestate` of the gateway's client span (the semantic
/// conventions' `params._meta` propagation), replacing the client's.
fn set_trace_context(meta: &mut RawObject<'_>) {
    if let Some(context) = crate::telemetry::current_trace_context() {
        meta.remove("tracestate");
        for (key, value) in context {
            meta.set_str(key, &value);
        }
    }
}

fn set_progress(meta: &mut RawObject<'_>, token: Option<&str>) {
    match token {
        Some(token) => meta.set_str(PROGRESS_TOKEN, token),
        None => {
            meta.remove(PROGRESS_TOKEN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).expect("raw")
    }

    #[test]
    fn modern_meta_keeps_client_keys_and_sets_gateway_ones() {
        let down = raw(
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"info","progressToken":7,"x.ext/k":[1]}"#,
        );
        let caps = raw(r#"{"elicitation":{}}"#);
        let info = raw(r#"{"name":"mcp-gateway","version":"1"}"#);
        let out = modern(Some(&down), &caps, &info, Some("gw-1"));
        assert_eq!(
            out.get(),
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp-gateway","version":"1"},"io.modelcontextprotocol/logLevel":"info","progressToken":"gw-1","x.ext/k":[1],"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}"#
        );
    }

    #[test]
    fn legacy_meta_drops_modern_keys() {
        let down =
            raw(r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p"}"#);
        assert_eq!(
            legacy(Some(&down), Some("gw-2")).map(|r| r.get().to_owned()),
            Some(r#"{"progressToken":"gw-2"}"#.to_owned())
        );
        assert!(legacy(Some(&down), None).is_none());
        assert!(legacy(None, None).is_none());
    }
}
