//! Where a callgrind dump's instructions went: each function's own instructions (not those of
//! the functions it calls), summed by the part of the stack the function belongs to (HTTP/1,
//! JSON, the allocator, the async runtime, ...). It is what the performance issue asks the
//! report to show where a target is out of reach (book: docs/src/performance.md).
//!
//! A function belongs to the crate its symbol names first (`<hyper::proto::h1::... as
//! tokio::io::AsyncRead>::poll_read` is hyper's); generic code instantiated for another crate's
//! type counts for the crate that wrote it (`serde_json` deserialising a gateway type is JSON).
//! `Hash`/`Hasher` implementations and hash tables count as hashing, serde visitors and
//! (de)serialisers as JSON, whoever derived them. A generic function named by its type parameter
//! alone (`<F as Future>::poll`) cannot be placed and counts as "other".

use std::collections::BTreeMap;

/// The parts, in the order a report shows them, with what each holds.
pub const PARTS: [(&str, &str); 11] = [
    (
        "HTTP/1",
        "hyper, hyper-util, http, httparse, http-body: both HTTP exchanges of a call",
    ),
    ("JSON", "serde_json and serde: reading and writing JSON-RPC"),
    ("allocator", "mimalloc: allocating and freeing"),
    ("mem copies", "libc memcpy, memmove, memset, memcmp"),
    (
        "async runtime",
        "tokio and futures: scheduling, wakers, timers, socket readiness",
    ),
    (
        "hashing",
        "Hash and Hasher implementations (SipHash) and hash tables",
    ),
    ("SHA-256", "aws-lc: credential-scope and capability digests"),
    (
        "telemetry",
        "tracing, metrics and OpenTelemetry instruments",
    ),
    (
        "gateway crates",
        "the mcp-* crates' own code: routing, sessions, auth and config lookups",
    ),
    (
        "std/core",
        "the rest of Rust's standard library (strings, Vec, Arc, time)",
    ),
    ("other", "every other crate and the C library"),
];

/// The part `symbol` (a demangled function name, as callgrind writes it) belongs to.
#[must_use]
pub fn part_of(symbol: &str) -> &'static str {
    let lower = symbol.to_ascii_lowercase();
    if ["memcpy", "memmove", "memset", "memcmp", "bcmp"]
        .iter()
        .any(|m| lower.contains(m))
    {
        return "mem copies";
    }
    if lower.contains("aws_lc") || lower.contains("sha256") {
        return "SHA-256";
    }
    if symbol.contains(" as core::hash::Hash>")
        || symbol.contains(" as core::hash::Hasher>")
        || symbol.starts_with("core::hash::")
        || symbol.starts_with("std::hash::")
        || symbol.contains("std::collections::hash::")
    {
        return "hashing";
    }
    // Serde's visitors and (de)serialisers, wherever they were derived or written, are JSON work.
    if [
        " as serde::de::Visitor>",
        " as serde_core::de::Visitor>",
        " as serde::de::Deserialize>",
        " as serde_core::de::Deserialize>",
        " as serde::ser::Serialize>",
        " as serde_core::ser::Serialize>",
    ]
    .iter()
    .any(|t| symbol.contains(t))
    {
        return "JSON";
    }
    let krate = first_crate(symbol);
    if krate.starts_with("mi_")
        || krate.starts_with("_mi_")
        || matches!(
            symbol,
            "__rustc::__rust_alloc"
                | "__rustc::__rust_dealloc"
                | "__rustc::__rust_realloc"
                | "__rustc::__rust_alloc_zeroed"
        )
    {
        return "allocator";
    }
    match krate {
        "hyper" | "hyper_util" | "http" | "httparse" | "http_body" | "http_body_util" => "HTTP/1",
        "serde_json" | "serde" | "serde_core" => "JSON",
        "tokio" | "futures_util" | "futures_core" | "futures_channel" | "atomic_waker" | "mio" => {
            "async runtime"
        }
        "hashbrown" => "hashing",
        "tracing" | "tracing_core" | "tracing_subscriber" | "metrics" | "metrics_util"
        | "opentelemetry" | "opentelemetry_sdk" => "telemetry",
        "core" | "alloc" | "std" | "__rustc" => "std/core",
        // Methods of slices and primitive types (`<[T] as ...>`, `<str as ...>`).
        k if k.starts_with('[') || PRIMITIVES.contains(&k) => "std/core",
        k if k.starts_with("mcp_") => "gateway crates",
        _ => "other",
    }
}

const PRIMITIVES: [&str; 17] = [
    "str", "bool", "char", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64",
    "i128", "isize", "f32", "f64",
];

/// The crate a symbol names first: `<&mut serde_json::de::Deserializer<R> as ...>::f` is
/// `serde_json`'s.
fn first_crate(symbol: &str) -> &str {
    let start = symbol.trim_start_matches(['<', '&', '(', '*']);
    if start.starts_with('[') {
        return "[";
    }
    let start = start
        .strip_prefix("mut ")
        .or_else(|| start.strip_prefix("dyn "))
        .or_else(|| start.strip_prefix("const "))
        .unwrap_or(start);
    let start = start.trim_start_matches(['<', '&']);
    let end = start.find("::").unwrap_or(start.len());
    let head = &start[..end];
    // A C symbol has no path: `mi_free`, `__memcpy_avx_unaligned_erms`, `clock_gettime@@...`.
    head.split(['<', ' ', '@']).next().unwrap_or(head)
}

/// Instructions (the first event) each part spent in a callgrind dump, counting every
/// function's own cost only: the cost line after a `calls=` line is the callee's inclusive
/// cost, already counted in the callee. Handles compressed (`fn=(7) name`, then `fn=(7)`) and
/// uncompressed names.
#[must_use]
pub fn by_part(dump: &str) -> BTreeMap<&'static str, u64> {
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    let mut parts = BTreeMap::new();
    let mut current: &'static str = "other";
    let mut after_calls = false;
    // A cost line is its positions (`line` by default; `instr line` with `--dump-instr=yes`),
    // then the events, instructions first.
    let mut positions = 1;
    for line in dump.lines() {
        if let Some(rest) = line.strip_prefix("positions:") {
            positions = rest.split_whitespace().count().max(1);
            continue;
        }
        if let Some(rest) = line.strip_prefix("fn=") {
            current = part_of(name(rest, &mut names));
            continue;
        }
        if let Some(rest) = line.strip_prefix("cfn=") {
            // Only to learn a compressed name defined here; the cost is the caller's.
            name(rest, &mut names);
            continue;
        }
        if line.starts_with("calls=") {
            after_calls = true;
            continue;
        }
        let is_cost = line
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '*'));
        if !is_cost {
            continue;
        }
        if std::mem::take(&mut after_calls) {
            continue;
        }
        let cost = line
            .split_whitespace()
            .nth(positions)
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        *parts.entry(current).or_insert(0) += cost;
    }
    parts
}

/// The name a `fn=`/`cfn=` value stands for, remembering compressed ids.
fn name<'a>(value: &'a str, names: &mut BTreeMap<&'a str, &'a str>) -> &'a str {
    let Some(rest) = value.strip_prefix('(') else {
        return value;
    };
    let Some((id, tail)) = rest.split_once(')') else {
        return value;
    };
    let tail = tail.trim_start();
    if tail.is_empty() {
        names.get(id).copied().unwrap_or(value)
    } else {
        names.insert(id, tail);
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_fall_into_their_parts() {
        let cases = [
            (
                "<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::parse",
                "HTTP/1",
            ),
            ("httparse::parse_headers_iter_uninit", "HTTP/1"),
            (
                "<&mut serde_json::de::Deserializer<R> as serde_core::de::Deserializer>::deserialize_struct",
                "JSON",
            ),
            ("mi_free", "allocator"),
            ("_mi_page_malloc_zero", "allocator"),
            ("__rustc::__rust_alloc", "allocator"),
            ("__memcpy_avx_unaligned_erms", "mem copies"),
            ("tokio::runtime::task::raw::poll", "async runtime"),
            ("core::hash::BuildHasher::hash_one", "hashing"),
            (
                "<mcp_router::upstream::session::SessionKey as core::hash::Hash>::hash",
                "hashing",
            ),
            ("hashbrown::map::HashMap<K,V,S,A>::insert", "hashing"),
            ("aws_lc_0_47_0_sha256_block_data_order_avx", "SHA-256"),
            (
                "tracing_subscriber::registry::sharded::Registry::new_span",
                "telemetry",
            ),
            (
                "<mcp_router::router::McpRouter as tower_service::Service<B>>::call::{{closure}}",
                "gateway crates",
            ),
            (
                "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
                "std/core",
            ),
            ("url::parser::Parser::parse_url", "other"),
            (
                "std::collections::hash::map::HashMap<K,V,S>::get",
                "hashing",
            ),
            (
                "<mcp_router::session::record::_::<impl serde_core::de::Deserialize for X>::deserialize::__Visitor as serde_core::de::Visitor>::visit_map",
                "JSON",
            ),
            ("<[T] as core::fmt::Debug>::fmt", "std/core"),
            ("<str as core::fmt::Display>::fmt", "std/core"),
            ("mio::poll::Poll::poll", "async runtime"),
            ("clock_gettime@@GLIBC_2.17", "other"),
        ];
        for (symbol, part) in cases {
            assert_eq!(part_of(symbol), part, "{symbol}");
            assert!(PARTS.iter().any(|(p, _)| *p == part));
        }
    }

    #[test]
    fn each_function_counts_its_own_instructions_only() {
        // `a` (hyper) spends 10 + 5 itself and calls `b` (serde_json, 100 inclusive); `b`
        // spends 100 itself; the compressed name `(2)` is defined at the call and reused.
        let dump = "version: 1\nevents: Ir\n\
            fl=(1) ???\nfn=(1) hyper::a\n3 10\ncfl=(1)\ncfn=(2) serde_json::b\ncalls=1 0\n7 100\n+1 5\n\
            fn=(2)\n0 100\n\
            fn=mi_free\n0 7\n\
            totals: 122\n";
        let parts = by_part(dump);
        assert_eq!(parts.get("HTTP/1"), Some(&15));
        assert_eq!(parts.get("JSON"), Some(&100));
        assert_eq!(parts.get("allocator"), Some(&7));
        assert_eq!(parts.values().sum::<u64>(), 122, "every instruction once");
    }

    #[test]
    fn instruction_positions_are_skipped_when_dumped() {
        // `--dump-instr=yes`: each cost line starts with an address, then the line.
        let dump = "positions: instr line
events: Ir
fn=hyper::a
0x1000 3 10
+2 * 5
";
        assert_eq!(by_part(dump).get("HTTP/1"), Some(&15));
    }
}
