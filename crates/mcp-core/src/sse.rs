//! Server-Sent Events: an encoder for events and a streaming decoder that accepts arbitrary chunks.
//!
//! The decoder follows the WHATWG event-stream parsing rules: `\n`, `\r\n` and `\r` line ends (also
//! split across chunks), a leading BOM, `:` comment lines, the optional space after the colon,
//! multi-line `data`, `retry` only when all digits, `id` containing NUL ignored, and an event with
//! an empty data buffer not dispatched (its `id` still becomes the last event id, which is how MCP
//! priming events work).

use std::mem;

use bytes::{Bytes, BytesMut};

/// One server-sent event.
///
/// ```
/// use mcp_core::sse::SseEvent;
///
/// let ev = SseEvent::message("{\"a\":1}\n{\"b\":2}").with_id("7");
/// assert_eq!(&ev.encode()[..], b"id: 7\ndata: {\"a\":1}\ndata: {\"b\":2}\n\n");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// `id:` field.
    pub id: Option<String>,
    /// `event:` field (absent means `message`).
    pub event: Option<String>,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// `retry:` reconnection time in milliseconds.
    pub retry: Option<u64>,
}

impl SseEvent {
    /// A `message` event carrying `data`.
    pub fn message(data: impl Into<String>) -> Self {
        Self {
            data: data.into(),
            ..Self::default()
        }
    }

    /// Sets the event id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the event type.
    #[must_use]
    pub fn with_event(mut self, event: impl Into<String>) -> Self {
        self.event = Some(event.into());
        self
    }

    /// Sets the retry hint.
    #[must_use]
    pub fn with_retry(mut self, retry_ms: u64) -> Self {
        self.retry = Some(retry_ms);
        self
    }

    /// The wire form. Line breaks inside `id` and `event` are dropped (they would end the field);
    /// every line of `data` becomes its own `data:` line.
    pub fn encode(&self) -> Bytes {
        let mut out = String::with_capacity(self.data.len() + 32);
        let single_line = |s: &str| s.replace(['\r', '\n'], "");
        if let Some(event) = &self.event {
            out.push_str("event: ");
            out.push_str(&single_line(event));
            out.push('\n');
        }
        if let Some(id) = &self.id {
            out.push_str("id: ");
            out.push_str(&single_line(id));
            out.push('\n');
        }
        if let Some(retry) = self.retry {
            out.push_str(&format!("retry: {retry}\n"));
        }
        let data = self.data.replace("\r\n", "\n").replace('\r', "\n");
        if !data.is_empty() || (self.id.is_none() && self.retry.is_none()) {
            for line in data.split('\n') {
                out.push_str("data: ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push('\n');
        Bytes::from(out)
    }
}

/// A decoding failure: the stream is not usable any more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A single event (or line) grew past the decoder's limit.
    #[error("SSE event larger than {0} bytes")]
    TooLarge(usize),
    /// The stream is not UTF-8.
    #[error("SSE stream is not valid UTF-8")]
    InvalidUtf8,
}

/// A streaming SSE decoder: [`push`](Self::push) chunks as they arrive, then take events with
/// [`next_event`](Self::next_event).
///
/// ```
/// use mcp_core::sse::SseDecoder;
///
/// let mut dec = SseDecoder::new();
/// dec.push(b"id: 1\nda").unwrap();
/// assert!(dec.next_event().unwrap().is_none());
/// dec.push(b"ta: hello\r").unwrap();
/// dec.push(b"\n\r\n").unwrap();
/// let ev = dec.next_event().unwrap().unwrap();
/// assert_eq!(ev.data, "hello");
/// assert_eq!(ev.id.as_deref(), Some("1"));
/// assert_eq!(dec.last_event_id(), "1");
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    buf: BytesMut,
    /// How many leading bytes of `buf` are known to hold no line terminator: a long line that
    /// arrives in many chunks is scanned once, not once per chunk.
    scanned: usize,
    max_event_size: usize,
    started: bool,
    skip_lf: bool,
    pending_bytes: usize,
    data: String,
    event: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    last_event_id: String,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// Default bound on one event: 4 MiB.
    pub const DEFAULT_MAX_EVENT_SIZE: usize = 4 * 1024 * 1024;

    /// A decoder with the default size limit.
    pub fn new() -> Self {
        Self::with_max_event_size(Self::DEFAULT_MAX_EVENT_SIZE)
    }

    /// A decoder that fails once one event or line exceeds `max` bytes, so a hostile or broken peer
    /// cannot make it buffer without bound.
    pub fn with_max_event_size(max: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            scanned: 0,
            max_event_size: max,
            started: false,
            skip_lf: false,
            pending_bytes: 0,
            data: String::new(),
            event: None,
            id: None,
            retry: None,
            last_event_id: String::new(),
        }
    }

    /// Adds bytes received from the stream.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), SseError> {
        self.buf.extend_from_slice(chunk);
        if self.buf.len() > self.max_event_size {
            return Err(SseError::TooLarge(self.max_event_size));
        }
        Ok(())
    }

    /// The id of the last event seen (set by any `id:` field, dispatched or not).
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The next complete event, if the buffered bytes contain one.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        while let Some(line) = self.take_line() {
            let line = std::str::from_utf8(&line).map_err(|_| SseError::InvalidUtf8)?;
            if line.is_empty() {
                self.pending_bytes = 0;
                if let Some(event) = self.dispatch() {
                    return Ok(Some(event));
                }
                continue;
            }
            self.pending_bytes += line.len();
            if self.pending_bytes > self.max_event_size {
                return Err(SseError::TooLarge(self.max_event_size));
            }
            self.field(line);
        }
        Ok(None)
    }

    /// Takes one line off the buffer (without its terminator), if a terminator has arrived.
    fn take_line(&mut self) -> Option<BytesMut> {
        if self.skip_lf && !self.buf.is_empty() {
            if self.buf[0] == b'\n' {
                let _ = self.buf.split_to(1);
                self.scanned = self.scanned.saturating_sub(1);
            }
            self.skip_lf = false;
        }
        if !self.started && self.buf.len() >= 3 {
            if self.buf.starts_with(b"\xEF\xBB\xBF") {
                let _ = self.buf.split_to(3);
                self.scanned = self.scanned.saturating_sub(3);
            }
            self.started = true;
        }
        let from = self.scanned.min(self.buf.len());
        let Some(offset) = self.buf[from..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r')
        else {
            self.scanned = self.buf.len();
            return None;
        };
        let line = self.buf.split_to(from + offset);
        self.scanned = 0;
        if self.buf[0] == b'\r' {
            // A CR may be followed by an LF in a chunk that has not arrived yet.
            self.skip_lf = true;
        }
        let _ = self.buf.split_to(1);
        self.started = true;
        Some(line)
    }

    fn field(&mut self, line: &str) {
        if line.starts_with(':') {
            return;
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => {
                self.id = Some(value.to_owned());
                self.last_event_id = value.to_owned();
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let id = self.id.take();
        let event = self.event.take();
        let retry = self.retry.take();
        if self.data.is_empty() {
            return None;
        }
        let mut data = mem::take(&mut self.data);
        data.pop();
        Some(SseEvent {
            id,
            event,
            data,
            retry,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut dec = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            dec.push(chunk).expect("push");
            while let Some(ev) = dec.next_event().expect("decode") {
                out.push(ev);
            }
        }
        out
    }

    #[test]
    fn encode_decode_round_trip_byte_by_byte() {
        let events = [
            SseEvent::message("{\"jsonrpc\":\"2.0\"}").with_id("a-1"),
            SseEvent::message("line1\nline2\n\nline4").with_event("custom"),
            SseEvent::message("x").with_retry(2500),
            SseEvent::message(""),
        ];
        let wire: Vec<u8> = events.iter().flat_map(|e| e.encode().to_vec()).collect();
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        let decoded = decode_all(&bytes);
        assert_eq!(
            &decoded[..],
            &events[..],
            "an empty `data:` line is still an event"
        );
    }

    #[test]
    fn handles_crlf_cr_bom_comments_and_field_quirks() {
        let decoded = decode_all(&[
            b"\xEF\xBB",
            b"\xBF: comment\r\ndata:no-space\r",
            b"\ndata:  two spaces\rid\r\n\r\nretry: 12x\ndata\n\n",
        ]);
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[0].data, "no-space\n two spaces");
        assert_eq!(decoded[0].id.as_deref(), Some(""));
        assert_eq!(decoded[1].data, "");
        assert_eq!(decoded[1].retry, None, "non-digit retry is ignored");
    }

    #[test]
    fn priming_event_sets_last_event_id_without_dispatch() {
        let mut dec = SseDecoder::new();
        dec.push(b"id: prime-0\n\nid: x\0y\ndata: a\n\n")
            .expect("push");
        let ev = dec.next_event().expect("ok").expect("event");
        assert_eq!(ev.data, "a");
        assert_eq!(ev.id, None, "an id containing NUL is ignored");
        assert_eq!(dec.last_event_id(), "prime-0");
    }

    #[test]
    fn bounds_buffering() {
        let mut dec = SseDecoder::with_max_event_size(16);
        assert_eq!(dec.push(&[b'a'; 17]), Err(SseError::TooLarge(16)));
        let mut dec = SseDecoder::with_max_event_size(16);
        for _ in 0..4 {
            dec.push(b"data: 0123\n").expect("each chunk fits");
            if let Err(e) = dec.next_event() {
                assert_eq!(e, SseError::TooLarge(16));
                return;
            }
        }
        panic!("an event spread over many lines must still hit the bound");
    }

    #[test]
    fn rejects_invalid_utf8() {
        let mut dec = SseDecoder::new();
        dec.push(b"data: \xff\n\n").expect("push");
        assert_eq!(dec.next_event(), Err(SseError::InvalidUtf8));
    }

    #[test]
    fn a_long_line_in_many_chunks_and_a_split_crlf_decode_once_whole() {
        let mut dec = SseDecoder::new();
        dec.push(b"\xEF\xBB").expect("push");
        assert_eq!(dec.next_event(), Ok(None));
        dec.push(b"\xBFdata: ").expect("push");
        for _ in 0..1000 {
            dec.push(b"abc").expect("push");
            assert_eq!(dec.next_event(), Ok(None));
        }
        dec.push(b"\r").expect("push");
        assert_eq!(dec.next_event(), Ok(None));
        dec.push(b"\n\r\nid: 7\n\n").expect("push");
        let event = dec.next_event().expect("valid").expect("an event");
        assert_eq!(event.data, "abc".repeat(1000));
        assert_eq!(
            dec.next_event(),
            Ok(None),
            "the id-only block dispatches nothing"
        );
        assert_eq!(dec.last_event_id(), "7");
    }
}
