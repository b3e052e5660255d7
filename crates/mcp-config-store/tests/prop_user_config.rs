//! Property tests of user configuration parsing and validation (the `user_config` fuzz target in
//! `fuzz/` drives the same entry points): no panic on arbitrary JSON or TOML text, and every
//! accepted configuration survives `to_json` → `from_json_str` unchanged.

use mcp_config_store::{DocumentFormat, UserConfig, UsersDocument};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(256)
}

fn backend() -> impl Strategy<Value = Value> {
    (
        1u16..,
        "(/[a-z0-9]{1,6}){0,3}",
        proptest::collection::vec(1u16.., 0..3),
        proptest::option::of(1u64..600_000),
        proptest::collection::btree_map("[a-z_]{1,8}", "[a-z_]{1,8}", 0..3),
        proptest::option::of(proptest::collection::vec("[a-z_]{1,8}", 0..3)),
    )
        .prop_map(|(port, path, replicas, timeout, aliases, allowed)| {
            let mut b = json!({ "url": format!("http://127.0.0.1:{port}{path}") });
            if !replicas.is_empty() {
                b["replicas"] = replicas
                    .iter()
                    .map(|p| format!("https://replica.example:{p}/mcp"))
                    .collect();
            }
            if let Some(t) = timeout {
                b["timeout_ms"] = json!(t);
            }
            if !aliases.is_empty() {
                b["aliases"] = json!(aliases);
            }
            if let Some(allowed) = allowed {
                b["allowed_tools"] = json!(allowed);
            }
            b
        })
}

/// Valid configurations: 0–3 virtual hosts of 1–3 backends each.
fn user_config() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map(
        "[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,20}",
        (
            prop_oneof![Just("prefix"), Just("auto")],
            proptest::collection::btree_map("[a-z0-9][a-z0-9_.-]{0,10}", backend(), 1..4),
        ),
        0..4,
    )
    .prop_map(|hosts| {
        let hosts: serde_json::Map<String, Value> = hosts
            .into_iter()
            .map(|(id, (naming, backends))| (id, json!({ "naming": naming, "backends": backends })))
            .collect();
        json!({ "virtual_hosts": hosts })
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = UserConfig::from_json_str(&text);
        let _ = UserConfig::from_json_slice(text.as_bytes());
        let _ = UserConfig::from_toml_str(&text);
        let _ = UsersDocument::parse(&text, DocumentFormat::Json);
        let _ = UsersDocument::parse(&text, DocumentFormat::Toml);
    }

    /// JSON-shaped and TOML-shaped noise gets past the syntax checks more often than random text.
    #[test]
    fn structured_noise_never_panics(
        json_text in "\\{\"virtual_hosts\":\\{\"[a-z.]{0,3}\":\\{(\"naming\":\"[a-z]{0,6}\",)?\"backends\":\\{\"[a-z-]{0,3}\":\\{\"(url|command|replicas|timeout_ms|transport)\":(\"[a-z:/.0-9]{0,20}\"|[0-9]{1,3}|\\[\\]|null)\\}\\}\\}\\}\\}",
        toml_text in "\\[virtual_hosts\\.[a-z.]{0,3}\\.backends\\.[a-z-]{0,3}\\]\n(url|command|timeout_ms|transport) = (\"[a-z:/.0-9]{0,20}\"|[0-9]{1,3}|\\[\\])\n",
    ) {
        if let Ok(cfg) = UserConfig::from_json_str(&json_text) {
            prop_assert_eq!(UserConfig::from_json_str(&cfg.to_json()), Ok(cfg));
        }
        if let Ok(cfg) = UserConfig::from_toml_str(&toml_text) {
            prop_assert_eq!(UserConfig::from_json_str(&cfg.to_json()), Ok(cfg));
        }
    }

    #[test]
    fn valid_configs_round_trip_through_json(doc in user_config()) {
        let text = doc.to_string();
        let cfg = UserConfig::from_json_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        let _ = cfg.warnings();
        let again = UserConfig::from_json_str(&cfg.to_json()).expect("re-serialised config");
        prop_assert_eq!(&again, &cfg);
        let users = json!({ "users": { "alice": doc } }).to_string();
        let users = UsersDocument::from_json_str(&users).expect("users document");
        prop_assert_eq!(users.users.get("alice").map(|c| &**c), Some(&cfg));
    }
}
