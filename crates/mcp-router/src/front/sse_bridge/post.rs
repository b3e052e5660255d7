//! `POST …/messages?sessionId=…`: one JSON-RPC message (or batch) for an open session, accepted
//! with `202` once it is valid; its answers arrive on the session's event stream.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use mcp_core::{ErrorObject, encode_error};
use serde_json::value::RawValue;

use super::relay::{self, InnerCall, Posted};
use super::{DETAIL_SESSION_NOT_FOUND, DETAIL_TOO_MANY_POSTS, Shared, admitted, detail};
use crate::body::BoxError;

/// Serves one POST; the answer's body is local (never the inner service's).
pub(crate) async fn post<B>(
    shared: Arc<Shared>,
    req: Request<B>,
    call: InnerCall,
) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = req.into_parts();
    if parts.method != Method::POST {
        let mut res = detail(
            StatusCode::METHOD_NOT_ALLOWED,
            "Only POST delivers messages",
        );
        res.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return res;
    }
    let ctx = match admitted(&parts.extensions) {
        Ok(ctx) => ctx,
        Err(res) => return *res,
    };
    let Some(id) = session_id(parts.uri.query()) else {
        return detail(StatusCode::BAD_REQUEST, "Missing sessionId query parameter");
    };
    let session = match shared.registry.get(&id) {
        Some(s) if s.belongs_to(&ctx.principal, &ctx.vhost_id) => s,
        // Another principal's id is as unknown as a made-up one: nothing tells them apart.
        _ => return detail(StatusCode::NOT_FOUND, DETAIL_SESSION_NOT_FOUND),
    };
    let bytes = match Limited::new(body, shared.max_body_bytes).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return detail(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large");
        }
        Err(_) => return detail(StatusCode::BAD_REQUEST, "Could not read the request body"),
    };
    let messages = match split(&bytes, shared.max_batch) {
        Ok(messages) => messages,
        Err(error) => return rpc_error(&error),
    };
    let Some(permit) = session.post_permits(messages.len()) else {
        let mut res = detail(StatusCode::TOO_MANY_REQUESTS, DETAIL_TOO_MANY_POSTS);
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return res;
    };
    tokio::spawn(async move {
        relay::forward(Posted {
            session,
            call,
            headers: parts.headers,
            extensions: parts.extensions,
            messages,
        })
        .await;
        drop(permit);
    });
    let mut res = Response::new(Full::new(Bytes::from_static(b"Accepted")));
    *res.status_mut() = StatusCode::ACCEPTED;
    res
}

fn session_id(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "sessionId")
        .map(|(_, value)| value.into_owned())
}

/// The messages of a body: one JSON value, or each element of a batch of at most `max_batch`
/// (2024-11-05 allows batches; the inner engine takes one message per request).
fn split(bytes: &Bytes, max_batch: usize) -> Result<Vec<Bytes>, ErrorObject> {
    let raw: &RawValue = serde_json::from_slice(bytes).map_err(|e| {
        ErrorObject::parse_error(format!("Parse error: the body is not JSON ({e})"))
    })?;
    if !raw.get().starts_with('[') {
        return Ok(vec![bytes.clone()]);
    }
    let batch: Vec<&RawValue> = serde_json::from_str(raw.get())
        .map_err(|e| ErrorObject::parse_error(format!("Parse error: {e}")))?;
    if batch.is_empty() {
        return Err(ErrorObject::invalid_request("Empty batch"));
    }
    if batch.len() > max_batch {
        return Err(ErrorObject::invalid_request(format!(
            "Batch too large: {} messages, at most {max_batch} in one POST",
            batch.len()
        )));
    }
    Ok(batch
        .into_iter()
        .map(|m| Bytes::copy_from_slice(m.get().as_bytes()))
        .collect())
}

/// `400` with a JSON-RPC error (`id: null`: the message could not be read far enough to know it).
fn rpc_error(error: &ErrorObject) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(encode_error(None, error))));
    *res.status_mut() = StatusCode::BAD_REQUEST;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_session_id_among_other_parameters() {
        assert_eq!(
            session_id(Some("a=1&sessionId=ab%63")),
            Some("abc".to_owned())
        );
        assert_eq!(session_id(Some("session_id=x")), None);
        assert_eq!(session_id(None), None);
    }

    #[test]
    fn splits_batches_and_refuses_what_is_not_json() {
        let one = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"x"}"#);
        assert_eq!(split(&one, 1).expect("one message"), vec![one.clone()]);
        let batch = Bytes::from_static(br#"[{"a":1}, {"b":[2]}]"#);
        let e = split(&batch, 1).expect_err("over the batch limit");
        assert_eq!(e.code, -32600);
        assert_eq!(
            e.message,
            "Batch too large: 2 messages, at most 1 in one POST"
        );
        assert_eq!(
            split(&batch, 2).expect("a batch"),
            vec![
                Bytes::from_static(br#"{"a":1}"#),
                Bytes::from_static(br#"{"b":[2]}"#)
            ]
        );
        assert_eq!(
            split(&Bytes::from_static(b"[]"), 2)
                .expect_err("empty")
                .code,
            -32600
        );
        let e = split(&Bytes::from_static(b"{nope"), 2).expect_err("not JSON");
        assert_eq!(e.code, -32700);
        assert!(e.message.starts_with("Parse error"), "{}", e.message);
    }
}
