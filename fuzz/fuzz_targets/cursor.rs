//! Pagination cursors: a `tools/list` with an arbitrary `params.cursor` through the real
//! `McpRouter` (as if the foundation layers had run) is always refused with `-32602` before any
//! backend is asked, since nothing but the gateway can mint one; `Sealer::open` never panics on
//! an arbitrary handle; seal → open gives back any payload, and only for the same binding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_gateway_fuzz::{ISSUER, SEALING_SECRET, SUBJECT, VHOST, modern_call};
use mcp_router::Sealer;

const PURPOSE: &str = "mcp-router/cursor/v1";

fuzz_target!(|data: &[u8]| {
    let handle = String::from_utf8_lossy(data);
    let code = modern_call("tools/list", None, serde_json::json!({ "cursor": handle }));
    assert_eq!(code, Some(-32602), "a forged cursor must be invalid params");

    let sealer = Sealer::new(SEALING_SECRET);
    let binding = [ISSUER, SUBJECT, VHOST, "tools/list"];
    assert!(sealer.open(PURPOSE, &binding, &handle).is_err());

    let sealed = sealer.seal(PURPOSE, &binding, data);
    assert_eq!(sealer.open(PURPOSE, &binding, &sealed).as_deref(), Ok(data));
    let other = [ISSUER, SUBJECT, VHOST, "prompts/list"];
    assert!(sealer.open(PURPOSE, &other, &sealed).is_err());
});
