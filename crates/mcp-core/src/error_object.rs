//! [`ErrorObject`]: a JSON-RPC error object, with a constructor for each code of
//! [`error_code`](crate::error_code).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error_code::{
    HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION,
};

/// A JSON-RPC error object: `{"code":…, "message":…, "data":…}`.
///
/// `data` is kept as raw JSON so an error received from a backend is relayed byte for byte.
///
/// ```
/// use mcp_core::{ErrorObject, error_code};
///
/// let e = ErrorObject::invalid_params("Unknown tool: weather-forecast");
/// assert_eq!(e.code, error_code::INVALID_PARAMS);
/// assert_eq!(
///     serde_json::to_string(&e).unwrap(),
///     r#"{"code":-32602,"message":"Unknown tool: weather-forecast"}"#
/// );
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Optional structured detail, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl PartialEq for ErrorObject {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.data.as_ref().map(|d| d.get()) == other.data.as_ref().map(|d| d.get())
    }
}

impl ErrorObject {
    /// An error with a code and message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches `data`, serialised once here.
    #[must_use]
    pub fn with_data(mut self, data: &impl Serialize) -> Self {
        self.data = serde_json::value::to_raw_value(data).ok();
        self
    }

    /// -32700 parse error.
    pub fn parse_error(message: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, message)
    }

    /// -32600 invalid request.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }

    /// -32601 method not found.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// -32602 invalid params.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603 internal error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// -32020 header mismatch (2026-07-28).
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(HEADER_MISMATCH, message)
    }

    /// -32021 missing required client capability, with `data.requiredCapabilities`.
    pub fn missing_required_client_capability(required: &serde_json::Value) -> Self {
        Self::new(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
        )
        .with_data(&serde_json::json!({ "requiredCapabilities": required }))
    }

    /// -32022 unsupported protocol version, with `data.supported` and `data.requested`.
    pub fn unsupported_protocol_version(supported: &[&str], requested: &str) -> Self {
        Self::new(
            UNSUPPORTED_PROTOCOL_VERSION,
            format!("Unsupported protocol version: {requested}"),
        )
        .with_data(&serde_json::json!({ "supported": supported, "requested": requested }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_version_carries_data() {
        let e = ErrorObject::unsupported_protocol_version(&["2026-07-28"], "1999-01-01");
        let json = serde_json::to_value(&e).expect("serialises");
        assert_eq!(json["code"], -32022);
        assert_eq!(json["data"]["supported"][0], "2026-07-28");
        assert_eq!(json["data"]["requested"], "1999-01-01");
    }

    #[test]
    fn data_round_trips_verbatim() {
        let e: ErrorObject =
            serde_json::from_str(r#"{"code":1,"message":"m","data":{"b":1,  "a":[2]}}"#)
                .expect("parses");
        assert_eq!(
            e.data.as_ref().map(|d| d.get()),
            Some(r#"{"b":1,  "a":[2]}"#)
        );
    }
}
