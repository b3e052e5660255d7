//! A linked backend's frames (stdio lines, HTTP+SSE events: `mcp_router::fuzzing::link_frames`):
//! dispatching arbitrary messages to a link with calls in flight never panics, and dropped calls
//! leave nothing on the link.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mcp_router::fuzzing::link_frames(data);
});
