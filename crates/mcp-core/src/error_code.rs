//! JSON-RPC and MCP error codes; [`ErrorObject`](crate::ErrorObject) has a constructor for each.

/// Invalid JSON was received (-32700).
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object (-32600).
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available (-32601).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (-32602). Since 2026-07-28 also "resource not found", unknown tool or
/// prompt, and invalid cursor.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal JSON-RPC error (-32603).
pub const INTERNAL_ERROR: i64 = -32603;
/// Resource not found in the 2025 revisions (-32002). Modern (2026-07-28) peers must not emit it;
/// they use [`INVALID_PARAMS`].
pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
/// URL elicitation required (-32042, 2025-11-25 only).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// A standard MCP header is missing, invalid, or does not match the body (-32020, 2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability that was not declared (-32021, 2026-07-28).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The requested protocol version is not supported (-32022, 2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
