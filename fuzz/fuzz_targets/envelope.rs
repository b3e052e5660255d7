//! `mcp_core::Envelope::parse` on arbitrary bytes: never panics, and every message it accepts
//! survives re-encoding with the `encode_*` functions exactly (kind, id, method, raw payloads).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_core::{
    Envelope, MessageKind, encode_error, encode_notification, encode_request, encode_result,
};

fuzz_target!(|data: &[u8]| {
    let Ok(env) = Envelope::parse(data) else {
        return;
    };
    let out = match env.kind() {
        MessageKind::Request => encode_request(
            env.id().expect("a request has an id"),
            env.method().expect("a request has a method"),
            env.params(),
        ),
        MessageKind::Notification => {
            assert!(env.id().is_none(), "a notification has no id");
            encode_notification(
                env.method().expect("a notification has a method"),
                env.params(),
            )
        }
        MessageKind::Response => encode_result(
            env.id().expect("a response has an id"),
            env.result().expect("a response has a result"),
        ),
        MessageKind::Error => match env.error() {
            Some(error) => encode_error(env.id(), &error),
            // An error member that is not an error object: nothing to re-encode.
            None => return,
        },
    };
    let again = Envelope::parse(&out)
        .unwrap_or_else(|e| panic!("re-encoded message does not parse ({e}): {out:?}"));
    assert_eq!(again.kind(), env.kind());
    assert_eq!(again.id(), env.id(), "ids must be echoed exactly");
    assert_eq!(
        again.id().map(|id| id.to_json().into_owned()),
        env.id().map(|id| id.to_json().into_owned())
    );
    assert_eq!(again.method(), env.method());
    assert_eq!(
        again.params().map(|p| p.get()),
        env.params().map(|p| p.get())
    );
    assert_eq!(
        again.result().map(|r| r.get()),
        env.result().map(|r| r.get())
    );
    assert_eq!(again.error(), env.error());
});
