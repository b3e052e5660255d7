//! The degraded marker of a stale answer: `_meta["mcp-gateway/degraded"].stale.age_ms`.
//!
//! A result served from the stale cache says so in its `_meta`, next to whatever the merge
//! already reported there (the router's `backends` and `items`, book: docs/src/architecture.md):
//!
//! ```json
//! {"tools": [...], "_meta": {"mcp-gateway/degraded": {"stale": {"age_ms": 1500}}}}
//! ```
//!
//! Only the top level of the result, of `_meta` and of the marker object are rewritten (as
//! [`RawObject`]s); every other value keeps its bytes, and keys keep their order.

use std::time::Duration;

use mcp_core::RawObject;
use serde_json::value::RawValue;

/// `_meta` key of the gateway's degraded marker (the same key the router uses for merges).
pub const DEGRADED_META_KEY: &str = "mcp-gateway/degraded";
/// Key of the stale entry inside the degraded marker.
pub const STALE_KEY: &str = "stale";

/// Why a result could not be marked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DegradedError {
    /// The JSON-RPC message is not valid UTF-8 JSON.
    #[error("not a JSON message")]
    NotJson,
    /// The named part (`message`, `result`, `_meta`) is not a JSON object.
    #[error("{0} is not a JSON object")]
    NotAnObject(&'static str),
    /// The JSON-RPC message has no `result` (an error or a request).
    #[error("message has no result")]
    NoResult,
}

/// `{"age_ms":<age in whole milliseconds>}`, the value of the stale entry.
pub fn stale_marker(age: Duration) -> Box<RawValue> {
    let ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
    // A decimal integer in braces is always valid JSON.
    RawValue::from_string(format!(r#"{{"age_ms":{ms}}}"#))
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// Adds `key: value` to the degraded marker of a JSON-RPC `result` object, creating `_meta` and
/// the marker when absent (a `null` `_meta` or a marker that is not an object is replaced), and
/// replacing an existing `key` in the marker.
///
/// ```
/// use mcp_fallback::degraded::mark_degraded;
/// use serde_json::value::RawValue;
///
/// let result = RawValue::from_string(r#"{"tools":[ {"name":"a-x"} ],"_meta":{"mcp-gateway/degraded":{"backends":[{"name":"b","reason":"backend unreachable"}]}}}"#.into()).unwrap();
/// let note = RawValue::from_string(r#"{"why":"test"}"#.into()).unwrap();
/// let marked = mark_degraded(&result, "note", &note).unwrap();
/// assert_eq!(
///     marked.get(),
///     r#"{"tools":[ {"name":"a-x"} ],"_meta":{"mcp-gateway/degraded":{"backends":[{"name":"b","reason":"backend unreachable"}],"note":{"why":"test"}}}}"#
/// );
/// ```
pub fn mark_degraded(
    result: &RawValue,
    key: &str,
    value: &RawValue,
) -> Result<Box<RawValue>, DegradedError> {
    let mut obj = RawObject::from_raw(result).map_err(|_| DegradedError::NotAnObject("result"))?;
    let meta = match obj.get_borrowed("_meta").filter(|m| m.get() != "null") {
        Some(raw) => RawObject::from_raw(raw).map_err(|_| DegradedError::NotAnObject("_meta"))?,
        None => RawObject::new(),
    };
    let meta = add_to_marker(meta, key, value);
    obj.set_raw("_meta", meta);
    Ok(obj.to_raw())
}

fn add_to_marker(mut meta: RawObject<'_>, key: &str, value: &RawValue) -> Box<RawValue> {
    let mut marker = meta
        .get_borrowed(DEGRADED_META_KEY)
        .and_then(|raw| RawObject::from_raw(raw).ok())
        .unwrap_or_default();
    marker.set_borrowed(key, value);
    let marker = marker.to_raw();
    meta.set_raw(DEGRADED_META_KEY, marker);
    meta.to_raw()
}

/// Marks a JSON-RPC `result` object as served stale:
/// `_meta["mcp-gateway/degraded"].stale = {"age_ms": n}` (see [`mark_degraded`] for the merge).
///
/// ```
/// use std::time::Duration;
/// use mcp_fallback::degraded::mark_stale;
/// use serde_json::value::RawValue;
///
/// let result = RawValue::from_string(r#"{"tools":[],"nextCursor":"c2"}"#.into()).unwrap();
/// let marked = mark_stale(&result, Duration::from_millis(1500)).unwrap();
/// assert_eq!(
///     marked.get(),
///     r#"{"tools":[],"nextCursor":"c2","_meta":{"mcp-gateway/degraded":{"stale":{"age_ms":1500}}}}"#
/// );
/// ```
pub fn mark_stale(result: &RawValue, age: Duration) -> Result<Box<RawValue>, DegradedError> {
    mark_degraded(result, STALE_KEY, &stale_marker(age))
}

/// [`mark_stale`] on the `result` of a whole JSON-RPC response message (`jsonrpc`, `id` and any
/// other member stay as they are).
///
/// ```
/// use std::time::Duration;
/// use mcp_fallback::degraded::mark_stale_message;
///
/// let msg = br#"{"jsonrpc":"2.0","id":7,"result":{"prompts":[]}}"#;
/// let marked = mark_stale_message(msg, Duration::from_secs(2)).unwrap();
/// assert_eq!(
///     marked,
///     br#"{"jsonrpc":"2.0","id":7,"result":{"prompts":[],"_meta":{"mcp-gateway/degraded":{"stale":{"age_ms":2000}}}}}"#
/// );
/// ```
pub fn mark_stale_message(message: &[u8], age: Duration) -> Result<Vec<u8>, DegradedError> {
    let text = std::str::from_utf8(message).map_err(|_| DegradedError::NotJson)?;
    let mut msg = RawObject::parse(text).map_err(|e| {
        if e.is_data() {
            DegradedError::NotAnObject("message")
        } else {
            DegradedError::NotJson
        }
    })?;
    let result = msg.get_borrowed("result").ok_or(DegradedError::NoResult)?;
    let marked = mark_stale(result, age)?;
    msg.set_raw("result", marked);
    Ok(msg.to_json().into_bytes())
}
