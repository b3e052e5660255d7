//! Property tests of the wire parsers (the fuzz targets `envelope`, `sse_decoder` and
//! `header_value` in `fuzz/` drive the same entry points): no panic on arbitrary input, and the
//! round trips the gateway relies on.

use http::HeaderValue;
use mcp_core::headers::{decode_header_value, encode_header_value};
use mcp_core::sse::{SseDecoder, SseError, SseEvent};
use mcp_core::{Envelope, MessageKind, RequestId, encode_request, encode_result};
use proptest::prelude::*;
use serde_json::value::RawValue;

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(256)
}

/// A JSON-RPC id as it may appear on the wire: integers, big or fractional numbers, strings.
fn id_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "-?[1-9][0-9]{18,30}",
        "-?[0-9]\\.[0-9]{1,5}([eE][+-]?[0-9]{1,2})?",
        any::<String>().prop_map(|s| serde_json::to_string(&s).expect("string")),
    ]
}

/// Every event until the end of the stream or the first error.
fn decode(chunks: impl Iterator<Item = impl AsRef<[u8]>>) -> (Vec<SseEvent>, Option<SseError>) {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        if let Err(e) = dec.push(chunk.as_ref()) {
            return (events, Some(e));
        }
        loop {
            match dec.next_event() {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(e) => return (events, Some(e)),
            }
        }
    }
    (events, None)
}

/// Events whose encoding must decode to themselves: non-empty data (an event with an id or retry
/// and no data is a priming event, not dispatched by design), single-line id and event name, no
/// NUL in the id (such ids are ignored), data lines already split on `\n` only.
fn sse_event() -> impl Strategy<Value = SseEvent> {
    (
        "[^\r\n]{0,20}(\n[^\r\n]{0,20}){0,3}",
        proptest::option::of("[^\r\n\0]{0,20}"),
        proptest::option::of("[^\r\n]{0,20}"),
        proptest::option::of(any::<u64>()),
    )
        .prop_filter("non-empty data", |(data, ..)| !data.is_empty())
        .prop_map(|(data, id, event, retry)| SseEvent {
            id,
            event,
            data,
            retry,
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn envelope_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Envelope::parse(&bytes);
    }

    #[test]
    fn envelope_parse_never_panics_on_near_json(
        id in id_text(),
        method in any::<String>(),
        params in "[\\[\\]{}\":,0-9a-z ]{0,40}",
    ) {
        let method = serde_json::to_string(&method).expect("string");
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method},"params":{params}}}"#);
        let _ = Envelope::parse(body.as_bytes());
    }

    /// A request's id, method and params survive parse → encode → parse exactly, and a reply
    /// echoes the id's original text.
    #[test]
    fn envelope_reserialisation_keeps_ids_exact(
        id in id_text(),
        method in any::<String>(),
        value in any::<String>(),
    ) {
        let method_json = serde_json::to_string(&method).expect("string");
        let value_json = serde_json::to_string(&value).expect("string");
        let params = format!(r#"{{ "v" : {value_json},"n":[1, 2.50, -0e0 ] }}"#);
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method_json},"params":{params}}}"#);
        let env = Envelope::parse(body.as_bytes()).expect("valid request");
        prop_assert_eq!(env.kind(), MessageKind::Request);
        prop_assert_eq!(env.method(), Some(method.as_str()));
        let parsed_id = env.id().expect("id").clone();
        prop_assert_eq!(parsed_id.to_json(), id.as_str());
        prop_assert_eq!(env.params().map(RawValue::get), Some(params.as_str()));

        let out = encode_request(&parsed_id, &method, env.params());
        let again = Envelope::parse(&out).expect("re-encoded request parses");
        prop_assert_eq!(again.id(), Some(&parsed_id));
        prop_assert_eq!(again.method(), Some(method.as_str()));
        prop_assert_eq!(again.params().map(RawValue::get), Some(params.as_str()));

        let result = RawValue::from_string("{}".to_owned()).expect("raw");
        let reply = encode_result(&parsed_id, &result);
        let expected = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        prop_assert_eq!(String::from_utf8(reply).expect("utf8"), expected);
    }

    #[test]
    fn request_id_deserialize_never_panics(text in any::<String>()) {
        let _ = serde_json::from_str::<RequestId>(&text);
    }

    #[test]
    fn header_value_round_trip(value in any::<String>()) {
        let encoded = encode_header_value(&value);
        prop_assert!(
            encoded.as_bytes().iter().all(|b| *b == b' ' || *b == b'\t' || b.is_ascii_graphic()),
            "{:?}", encoded
        );
        let decoded = decode_header_value(&encoded);
        prop_assert_eq!(decoded.as_deref(), Ok(value.as_str()));
    }

    #[test]
    fn header_value_plain_ascii_is_sent_as_is(value in "[!-~]([ !-~]{0,30}[!-~])?") {
        prop_assume!(!(value.starts_with("=?base64?") && value.ends_with("?=")));
        prop_assert_eq!(encode_header_value(&value), value.as_str());
    }

    #[test]
    fn header_value_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let _ = decode_header_value(&value);
        }
        let sentinel = [b"=?base64?".as_slice(), &bytes, b"?="].concat();
        if let Ok(value) = HeaderValue::from_bytes(&sentinel) {
            let _ = decode_header_value(&value);
        }
    }

    /// Arbitrary bytes decode to the same events (and the same first error) however the stream is
    /// split into chunks.
    #[test]
    fn sse_decoding_does_not_depend_on_chunking(
        stream in proptest::collection::vec(
            prop_oneof![
                Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), Just(0xEF), Just(0xBB), Just(0xBF),
                any::<u8>(), b'a'..=b'z',
            ],
            0..200,
        ),
        chunk in 1usize..17,
    ) {
        let stream = [b"data: x\nid: 1\n".as_slice(), &stream].concat();
        let whole = decode(std::iter::once(&stream));
        let chunked = decode(stream.chunks(chunk));
        prop_assert_eq!(whole, chunked);
    }

    #[test]
    fn sse_encode_decode_round_trip(
        events in proptest::collection::vec(sse_event(), 1..5),
        chunk in 1usize..9,
    ) {
        let wire: Vec<u8> = events.iter().flat_map(|e| e.encode().to_vec()).collect();
        let (decoded, error) = decode(wire.chunks(chunk));
        prop_assert_eq!(error, None);
        prop_assert_eq!(decoded, events);
    }
}
