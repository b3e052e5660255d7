//! Hot paths of the wire level: parsing a JSON-RPC envelope (payloads stay raw) and decoding an
//! SSE response stream. `cargo bench -p mcp-core`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcp_core::Envelope;
use mcp_core::sse::SseDecoder;

/// A 2026-07-28 `tools/call` as a client sends it.
const CALL: &str = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"github-search_issues","arguments":{"query":"is:open label:bug","limit":20},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0.0"},"progressToken":"p-42"}}}"#;

/// A backend's streamed answer: two progress notifications, then the result.
fn sse_stream() -> Vec<u8> {
    let mut stream = String::new();
    for i in 1..=2 {
        stream.push_str(&format!(
            "id: {i}\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"p-42\",\"progress\":{i},\"total\":2}}}}\n\n"
        ));
    }
    stream.push_str("id: 3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"20 issues\"}],\"resultType\":\"complete\"}}\n\n");
    stream.into_bytes()
}

fn envelope(c: &mut Criterion) {
    let mut group = c.benchmark_group("envelope");
    group.throughput(Throughput::Bytes(CALL.len() as u64));
    group.bench_function("parse_tools_call", |b| {
        b.iter(|| {
            let env = Envelope::parse(black_box(CALL.as_bytes())).expect("valid request");
            black_box((env.method(), env.params()));
        });
    });
    group.finish();
}

fn sse(c: &mut Criterion) {
    let stream = sse_stream();
    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.bench_function("decode_3_events", |b| {
        b.iter(|| {
            let mut decoder = SseDecoder::new();
            decoder
                .push(black_box(&stream))
                .expect("within the size limit");
            let mut events = 0;
            while let Some(event) = decoder.next_event().expect("valid stream") {
                black_box(event);
                events += 1;
            }
            assert_eq!(events, 3);
        });
    });
    group.finish();
}

criterion_group!(benches, envelope, sse);
criterion_main!(benches);
