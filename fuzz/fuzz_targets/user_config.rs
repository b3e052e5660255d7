//! User configuration validation (`mcp_config_store::UserConfig`, `UsersDocument`), JSON and TOML:
//! never panics, and every configuration it accepts survives `to_json` → `from_json_str` unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_config_store::{DocumentFormat, UserConfig, UsersDocument};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let _ = UserConfig::from_json_slice(rest);
    let text = String::from_utf8_lossy(rest);
    let accepted = match mode % 4 {
        0 => UserConfig::from_json_str(&text).ok(),
        1 => UserConfig::from_toml_str(&text).ok(),
        2 => {
            if let Ok(doc) = UsersDocument::parse(&text, DocumentFormat::Json) {
                let _ = doc.warnings();
            }
            None
        }
        _ => {
            if let Ok(doc) = UsersDocument::parse(&text, DocumentFormat::Toml) {
                let _ = doc.warnings();
            }
            None
        }
    };
    if let Some(config) = accepted {
        let _ = config.warnings();
        let json = config.to_json();
        let again = UserConfig::from_json_str(&json)
            .unwrap_or_else(|e| panic!("re-serialised config refused ({e}): {json}"));
        assert_eq!(again, config, "round trip through {json}");
    }
});
