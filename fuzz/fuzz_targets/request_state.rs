//! MRTR `requestState` envelopes: a `tools/call` with an arbitrary `requestState` through the real
//! `McpRouter` is always refused with `-32602` before anything reaches the backend;
//! `Sealer::open` never panics on an arbitrary handle; seal → open gives back any payload, and
//! only for the same binding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_gateway_fuzz::{ISSUER, SEALING_SECRET, SUBJECT, VHOST, modern_call};
use mcp_router::Sealer;

const PURPOSE: &str = "mcp-router/request-state/v1";

fuzz_target!(|data: &[u8]| {
    let state = String::from_utf8_lossy(data);
    let code = modern_call(
        "tools/call",
        Some("b-echo"),
        serde_json::json!({ "name": "b-echo", "arguments": {}, "requestState": state }),
    );
    assert_eq!(
        code,
        Some(-32602),
        "a forged requestState must be invalid params"
    );

    let sealer = Sealer::new(SEALING_SECRET);
    let binding = [ISSUER, SUBJECT, VHOST, "b", "tools/call", "echo"];
    assert!(sealer.open(PURPOSE, &binding, &state).is_err());

    let sealed = sealer.seal(PURPOSE, &binding, data);
    assert_eq!(sealer.open(PURPOSE, &binding, &sealed).as_deref(), Ok(data));
    let other = [ISSUER, SUBJECT, VHOST, "b", "tools/call", "other"];
    assert!(sealer.open(PURPOSE, &other, &sealed).is_err());
});
