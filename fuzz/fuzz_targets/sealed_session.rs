//! Sealed session ids (`mcp_router::session::SealedSessionStore`, a fixed key ring): opening an
//! arbitrary id never panics and never yields a session; create → get gives back any record;
//! `KeyRing::parse` never panics on an arbitrary key ring specification.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcp_gateway_fuzz::ready;
use mcp_router::session::{
    BackendEra, BackendSession, KeyRing, SealedSessionStore, SessionRecord, SessionStore,
};

fn store() -> &'static SealedSessionStore {
    static STORE: OnceLock<SealedSessionStore> = OnceLock::new();
    STORE.get_or_init(|| {
        let ring = KeyRing::parse(
            "k2:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=, \
             k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        )
        .expect("fixed key ring");
        SealedSessionStore::new(ring)
    })
}

/// A record whose strings come from the input (`\0`-separated fields).
fn record(text: &str) -> SessionRecord {
    let mut fields = text.split('\0').map(str::to_owned);
    let mut next = || fields.next().unwrap_or_default();
    let issuer = next();
    let subject = next();
    let vhost = next();
    let protocol_version = next();
    let client_capabilities = next();
    let log_level = Some(next()).filter(|l| !l.is_empty());
    let backends = (0..text.len() % 4)
        .map(|i| BackendSession {
            name: next(),
            era: [None, Some(BackendEra::Modern), Some(BackendEra::Legacy)][i % 3],
            upstream_session_id: Some(next()).filter(|s| !s.is_empty()),
            version: Some(next()).filter(|s| !s.is_empty()),
            url: Some(next()).filter(|s| !s.is_empty()),
        })
        .collect();
    let subscriptions = fields.collect();
    SessionRecord {
        issuer,
        subject,
        vhost,
        protocol_version,
        client_capabilities,
        log_level,
        backends,
        subscriptions,
        created_at_ms: None,
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let store = store();
    assert_eq!(
        ready(store.get(&text)),
        Ok(None),
        "a forged session id must be unknown"
    );
    let _ = KeyRing::parse(&text);

    let record = record(&text);
    let id = ready(store.create(record.clone())).expect("seal");
    assert!(id.starts_with("k2."), "sealed with the newest key: {id}");
    assert!(
        id.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "visible ASCII: {id}"
    );
    let opened = ready(store.get(&id)).expect("open");
    assert_eq!(opened.as_deref(), Some(&record));
    // Flipping one character of the sealed body must make the id unknown.
    let mut tampered = id.into_bytes();
    let at = 3 + data.len() % (tampered.len() - 3);
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ASCII");
    assert_eq!(ready(store.get(&tampered)), Ok(None), "tampered id opened");
});
