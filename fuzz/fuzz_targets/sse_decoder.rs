//! `mcp_core::sse::SseDecoder` on arbitrary bytes: never panics, yields the same events (and the
//! same first error) however the stream is split into chunks, and every event it yields survives
//! `SseEvent::encode` and decoding again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_core::sse::{SseDecoder, SseError, SseEvent};

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

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let whole = decode(std::iter::once(stream));
    let chunk = usize::from(split % 16) + 1;
    let chunked = decode(stream.chunks(chunk));
    assert_eq!(
        whole, chunked,
        "chunking changed the decoded events (chunk size {chunk})"
    );

    for event in &whole.0 {
        // An event with an id or retry but no data encodes as a priming event, which is not
        // dispatched by design; everything else must come back unchanged.
        if event.data.is_empty() && (event.id.is_some() || event.retry.is_some()) {
            continue;
        }
        let wire = event.encode();
        let (again, error) = decode(std::iter::once(&wire));
        assert_eq!(error, None, "re-encoded event does not decode: {wire:?}");
        assert_eq!(again, [event.clone()], "re-encoded event differs: {wire:?}");
    }
});
