//! Property tests of the gateway's sealed handles (the `cursor`, `request_state` and
//! `sealed_session` fuzz targets in `fuzz/` drive the same entry points): `Sealer` seal → open
//! round trips and binding, sealed session ids create → get, and no panic or false acceptance on
//! arbitrary or tampered handles.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcp_router::Sealer;
use mcp_router::session::{
    BackendEra, BackendSession, KeyRing, SealedSessionStore, SessionRecord, SessionStore,
};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(256)
}

const SECRET: &[u8] = b"proptest-sealing-secret-proptest-sealing";
const RING: &str = "k2:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=, \
                    k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// The sealed store never waits on I/O: poll once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the sealed store must not wait"),
    }
}

fn store() -> SealedSessionStore {
    SealedSessionStore::new(KeyRing::parse(RING).expect("ring"))
}

fn backend() -> impl Strategy<Value = BackendSession> {
    (
        any::<String>(),
        prop_oneof![
            Just(None),
            Just(Some(BackendEra::Modern)),
            Just(Some(BackendEra::Legacy))
        ],
        proptest::option::of(any::<String>()),
        proptest::option::of(any::<String>()),
        proptest::option::of(any::<String>()),
    )
        .prop_map(
            |(name, era, upstream_session_id, version, url)| BackendSession {
                name,
                era,
                upstream_session_id,
                version,
                url,
            },
        )
}

fn record() -> impl Strategy<Value = SessionRecord> {
    (
        (any::<String>(), any::<String>(), any::<String>()),
        (any::<String>(), any::<String>()),
        proptest::option::of(any::<String>()),
        proptest::collection::vec(backend(), 0..4),
        proptest::collection::vec(any::<String>(), 0..3),
    )
        .prop_map(
            |(
                (issuer, subject, vhost),
                (protocol_version, client_capabilities),
                log_level,
                backends,
                subscriptions,
            )| SessionRecord {
                issuer,
                subject,
                vhost,
                protocol_version,
                client_capabilities,
                log_level,
                backends,
                subscriptions,
                // Sealed ids do not carry it (see `Compact::into_record`).
                created_at_ms: None,
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn seal_open_round_trip_and_binding(
        purpose in "mcp-router/(cursor|request-state|task)/v1",
        binding in proptest::collection::vec(any::<String>(), 0..5),
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        extra in any::<String>(),
    ) {
        let sealer = Sealer::new(SECRET);
        let bind: Vec<&str> = binding.iter().map(String::as_str).collect();
        let handle = sealer.seal(&purpose, &bind, &payload);
        // Encrypted: the handle is base64url of nonce, ciphertext and tag, and the payload is
        // nowhere in it (8 random bytes reappearing by chance: 2^-64 per position).
        let raw = URL_SAFE_NO_PAD.decode(&handle).expect("base64url");
        prop_assert_eq!(raw.len(), payload.len() + 28);
        if payload.len() >= 8 {
            prop_assert!(!raw.windows(8).any(|w| w == &payload[..8]));
        }
        prop_assert_eq!(sealer.open(&purpose, &bind, &handle), Ok(payload));
        // Any other binding (one more field, or a field changed) refuses the handle.
        let mut longer = bind.clone();
        longer.push(&extra);
        prop_assert!(sealer.open(&purpose, &longer, &handle).is_err());
        if let Some(first) = binding.first() {
            let changed = format!("{first}x");
            let mut other = bind.clone();
            other[0] = &changed;
            prop_assert!(sealer.open(&purpose, &other, &handle).is_err());
        }
        prop_assert!(Sealer::new(b"another key").open(&purpose, &bind, &handle).is_err());
    }

    #[test]
    fn arbitrary_handles_never_open(
        handle in prop_oneof![
            any::<String>(),
            "[A-Za-z0-9_-]{0,40}\\.[A-Za-z0-9_-]{0,60}",
            "[A-Za-z0-9_-]{36,160}",
        ],
    ) {
        let sealer = Sealer::new(SECRET);
        for purpose in ["mcp-router/cursor/v1", "mcp-router/request-state/v1"] {
            prop_assert!(sealer.open(purpose, &["iss", "alice", "vh", "tools/list"], &handle).is_err());
        }
    }

    #[test]
    fn tampered_handles_never_open(payload in proptest::collection::vec(any::<u8>(), 0..64), at in any::<prop::sample::Index>()) {
        let sealer = Sealer::new(SECRET);
        let handle = sealer.seal("mcp-router/cursor/v1", &["a"], &payload);
        let mut bytes = handle.into_bytes();
        let at = at.index(bytes.len());
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).expect("ASCII");
        prop_assert!(sealer.open("mcp-router/cursor/v1", &["a"], &tampered).is_err());
    }

    #[test]
    fn sealed_sessions_round_trip(record in record()) {
        let store = store();
        let id = ready(store.create(record.clone())).expect("seal");
        prop_assert!(id.starts_with("k2."));
        prop_assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{}", id);
        let opened = ready(store.get(&id)).expect("open");
        prop_assert_eq!(opened.as_deref(), Some(&record));
        // The older key of the ring still opens ids it sealed; a ring without it does not.
        let old = SealedSessionStore::new(
            KeyRing::parse("k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=").expect("ring"),
        );
        let old_id = ready(old.create(record.clone())).expect("seal");
        let opened_old = ready(store.get(&old_id)).expect("open");
        prop_assert_eq!(opened_old.as_deref(), Some(&record));
        prop_assert_eq!(ready(old.get(&id)), Ok(None));
    }

    #[test]
    fn arbitrary_session_ids_are_unknown(
        id in prop_oneof![
            any::<String>(),
            "k[12]\\.[A-Za-z0-9_-]{0,120}",
        ],
    ) {
        prop_assert_eq!(ready(store().get(&id)), Ok(None));
    }

    #[test]
    fn tampered_session_ids_are_unknown(at in any::<prop::sample::Index>(), subject in "[a-z]{1,10}") {
        let store = store();
        let record = SessionRecord {
            issuer: "iss".into(),
            subject,
            vhost: "vh".into(),
            protocol_version: "2025-11-25".into(),
            client_capabilities: "{}".into(),
            log_level: None,
            backends: vec![],
            subscriptions: vec![],
            created_at_ms: None,
        };
        let id = ready(store.create(record)).expect("seal");
        let mut bytes = id.into_bytes();
        let at = at.index(bytes.len());
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).expect("ASCII");
        prop_assert_eq!(ready(store.get(&tampered)), Ok(None));
    }

    #[test]
    fn key_ring_parse_never_panics(spec in prop_oneof![
        any::<String>(),
        "([ !-~]{0,18}:[A-Za-z0-9+/_=-]{0,46},?){0,3}",
    ]) {
        let _ = KeyRing::parse(&spec);
    }
}
