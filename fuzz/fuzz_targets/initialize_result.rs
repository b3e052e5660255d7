//! A backend's `initialize` result and `Mcp-Session-Id` (`mcp_router::fuzzing::initialize_result`):
//! what the gateway keeps of them is bounded in bytes and names a known 2025 revision, whatever
//! the backend answers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mcp_router::fuzzing::initialize_result(data);
});
