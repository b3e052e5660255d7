//! Validation of a modern (2026-07-28) request: standard headers against the body, required
//! `_meta`, supported version, known method (2026-07-28 "Server Validation").
//!
//! | problem | HTTP | JSON-RPC |
//! |---|---|---|
//! | `MCP-Protocol-Version` missing, `Mcp-Method` missing or different from the body, `Mcp-Name` missing or different (decoded) from `params.name`/`params.uri`, a standard header repeated or with invalid characters, `_meta` version different from the header | 400 | -32020 |
//! | version not supported | 400 | -32022, `data.supported`, `data.requested` |
//! | `_meta` missing `io.modelcontextprotocol/protocolVersion` or `…/clientCapabilities` | 400 | -32602 |
//! | method unknown to 2026-07-28 | 404 | -32601 |

use http::{HeaderMap, HeaderName, StatusCode};
use mcp_core::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, decode_header_value};
use mcp_core::{Envelope, Era, ErrorObject, Method, ProtocolVersion, RawObject};
use serde_json::value::RawValue;

use crate::ops::client_meta::ClientMeta;
use crate::upstream::{CLIENT_CAPABILITIES, PROTOCOL_VERSION};

/// A validation failure: the HTTP status and the JSON-RPC error to answer with.
pub(crate) type Rejection = (StatusCode, ErrorObject);

/// A validated modern request.
pub(crate) struct Validated<'a> {
    pub(crate) method: Method,
    /// `params` without `_meta`.
    pub(crate) params: RawObject<'a>,
    /// The request's `_meta`.
    pub(crate) meta: &'a RawValue,
    /// `_meta["io.modelcontextprotocol/clientCapabilities"]`.
    pub(crate) client_caps: &'a RawValue,
    /// What `_meta` asks of a call, read from the object parsed here (not parsed again).
    pub(crate) client: ClientMeta,
}

fn mismatch(message: impl Into<String>) -> Rejection {
    (
        StatusCode::BAD_REQUEST,
        ErrorObject::header_mismatch(message),
    )
}

/// The single value of a standard header, decoded; an error when repeated or undecodable.
fn single_header(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>, Rejection> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(mismatch(format!("duplicate {name} header")));
    }
    decode_header_value(value)
        .map(|v| Some(v.into_owned()))
        .map_err(|e| mismatch(format!("{name} header: {e}")))
}

/// Validates a request of the modern era.
pub(crate) fn validate<'a>(
    headers: &HeaderMap,
    env: &Envelope<'a>,
) -> Result<Validated<'a>, Rejection> {
    let body_method = env.method().unwrap_or_default();
    let version = single_header(headers, &MCP_PROTOCOL_VERSION)?
        .ok_or_else(|| mismatch("missing required MCP-Protocol-Version header"))?;
    let supported = matches!(version.parse::<ProtocolVersion>(), Ok(v) if v.era() == Era::Modern);
    if !supported {
        return Err((
            StatusCode::BAD_REQUEST,
            ErrorObject::unsupported_protocol_version(
                &ProtocolVersion::supported_strings(Era::Modern),
                &version,
            ),
        ));
    }
    match single_header(headers, &MCP_METHOD)? {
        None => return Err(mismatch("missing required Mcp-Method header")),
        Some(m) if m != body_method => {
            return Err(mismatch(format!(
                "Mcp-Method header `{m}` does not match body method `{body_method}`"
            )));
        }
        Some(_) => {}
    }
    let method = Method::from_name(body_method)
        .filter(|m| m.is_modern_client_request())
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                ErrorObject::method_not_found(body_method),
            )
        })?;
    let mut params = match env.params() {
        Some(raw) => RawObject::from_raw(raw).map_err(|_| {
            (
                StatusCode::BAD_REQUEST,
                ErrorObject::invalid_params("params must be an object"),
            )
        })?,
        None => RawObject::new(),
    };
    let (meta, client_caps, client) = required_meta(&params, &version)?;
    check_name_header(headers, method, &params)?;
    params.remove("_meta");
    Ok(Validated {
        method,
        params,
        meta,
        client_caps,
        client,
    })
}

/// `_meta`, its client capabilities and what it asks of a call.
fn required_meta<'a>(
    params: &RawObject<'a>,
    header_version: &str,
) -> Result<(&'a RawValue, &'a RawValue, ClientMeta), Rejection> {
    let missing = |key: &str| {
        (
            StatusCode::BAD_REQUEST,
            ErrorObject::invalid_params(format!("Missing required _meta field: {key}")),
        )
    };
    let meta: &'a RawValue = params
        .get_borrowed("_meta")
        .ok_or_else(|| missing(PROTOCOL_VERSION))?;
    let meta_obj = RawObject::from_raw(meta).map_err(|_| {
        (
            StatusCode::BAD_REQUEST,
            ErrorObject::invalid_params("_meta must be an object"),
        )
    })?;
    let version = meta_obj
        .get_str(PROTOCOL_VERSION)
        .ok_or_else(|| missing(PROTOCOL_VERSION))?;
    if version != header_version {
        return Err(mismatch(format!(
            "MCP-Protocol-Version header `{header_version}` does not match _meta protocolVersion `{version}`"
        )));
    }
    let caps = meta_obj
        .get_borrowed(CLIENT_CAPABILITIES)
        .ok_or_else(|| missing(CLIENT_CAPABILITIES))?;
    if !caps.get().starts_with('{') {
        return Err((
            StatusCode::BAD_REQUEST,
            ErrorObject::invalid_params(format!("{CLIENT_CAPABILITIES} must be an object")),
        ));
    }
    if let Some(error) = crate::context::oversize_capabilities(caps) {
        return Err((StatusCode::BAD_REQUEST, error));
    }
    Ok((
        meta,
        caps,
        ClientMeta::from_object(Era::Modern, Some(&meta_obj)),
    ))
}

fn check_name_header(
    headers: &HeaderMap,
    method: Method,
    params: &RawObject<'_>,
) -> Result<(), Rejection> {
    if !method.requires_mcp_name_header() {
        return Ok(());
    }
    let key = match method {
        Method::ResourcesRead => "uri",
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => "taskId",
        _ => "name",
    };
    let expected = params.get_str(key).unwrap_or_default();
    match single_header(headers, &MCP_NAME)? {
        None => Err(mismatch(format!(
            "missing required Mcp-Name header for `{}`",
            method.as_str()
        ))),
        Some(name) if name != expected => Err(mismatch(format!(
            "Mcp-Name header `{name}` does not match body value `{expected}`"
        ))),
        Some(_) => Ok(()),
    }
}
