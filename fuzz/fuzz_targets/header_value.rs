//! The `=?base64?…?=` header value codec of `mcp_core::headers`: decoding arbitrary header bytes
//! never panics, and encode → decode gives back any string.
#![no_main]

use http::HeaderValue;
use libfuzzer_sys::fuzz_target;
use mcp_core::headers::{decode_header_value, encode_header_value};

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = HeaderValue::from_bytes(data)
        && let Ok(decoded) = decode_header_value(&value)
    {
        let encoded = encode_header_value(&decoded);
        assert_eq!(decode_header_value(&encoded).as_deref(), Ok(&*decoded));
    }
    let text = String::from_utf8_lossy(data);
    let encoded = encode_header_value(&text);
    assert!(
        encoded
            .as_bytes()
            .iter()
            .all(|b| *b == b' ' || *b == b'\t' || b.is_ascii_graphic()),
        "encoded value must be visible ASCII: {encoded:?}"
    );
    assert_eq!(
        decode_header_value(&encoded).as_deref(),
        Ok(&*text),
        "round trip of {text:?} via {encoded:?}"
    );
});
