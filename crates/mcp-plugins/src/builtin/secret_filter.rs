//! `secret_filter`: finds secrets in arguments and results and denies the call or redacts them.
//!
//! ```toml
//! [[plugins]]
//! name = "secrets"
//! kind = "secret_filter"
//! hooks = ["tool_pre_invoke", "tool_post_invoke"]
//! [plugins.config]
//! action = "redact"                          # deny (default) | redact
//! detectors = ["aws_access_key", "private_key"]   # default: every built-in detector
//! patterns = { ticket = "TICKET-[0-9]{6}" }  # extra regexes, by name
//! replacement = "[REDACTED]"                 # default
//! ```
//!
//! Built-in detectors: `aws_access_key` (`AKIA…`/`ASIA…` access key ids), `private_key` (PEM
//! `-----BEGIN … PRIVATE KEY-----` blocks), `github_token` (`ghp_…` and friends),
//! `google_api_key` (`AIza…`), `slack_token` (`xox…-`).
//!
//! Matching runs on the decoded JSON strings (so an `\u`-escaped secret is still found). The
//! common case costs one scan of the raw text: a payload without any backslash is decoded only
//! when that scan finds a match (a custom pattern using `^`, `$`, `\A` or `\z` turns this
//! shortcut off, since anchors match differently inside the JSON text). `deny` answers
//! `Blocked: arguments contain a secret (<detector>)` (or `result`), never the secret itself.
//! `redact` rewrites every matching string (object keys too) and sends the rewritten payload
//! (object keys come out sorted).

use std::collections::BTreeMap;

use regex::{Regex, RegexSet};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{ConfigError, HookSet, Plugin, PluginConfig, PluginContext, Verdict};

/// The kind name.
pub const KIND: &str = "secret_filter";

/// The built-in detectors: name and regex.
pub const DETECTORS: &[(&str, &str)] = &[
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    (
        "private_key",
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY-----)?",
    ),
    (
        "github_token",
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b",
    ),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("slack_token", r"\bxox[baprs]-[0-9A-Za-z\-]{10,}\b"),
];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    #[default]
    Deny,
    Redact,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    action: Action,
    detectors: Option<Vec<String>>,
    #[serde(default)]
    patterns: BTreeMap<String, String>,
    #[serde(default = "default_replacement")]
    replacement: String,
    #[serde(default = "super::default_deny_code")]
    code: i64,
}

fn default_replacement() -> String {
    "[REDACTED]".to_owned()
}

/// The `secret_filter` plugin.
#[derive(Debug)]
pub struct SecretFilter {
    action: Action,
    names: Vec<String>,
    set: RegexSet,
    regexes: Vec<Regex>,
    replacement: String,
    code: i64,
    /// Whether a miss on the raw text of an escape-free payload is final (false when a pattern is
    /// anchored: `^`/`$` match differently inside the JSON text than in the decoded string).
    prefilter: bool,
}

impl SecretFilter {
    /// Builds the plugin from its `config` table.
    pub fn from_config(config: &PluginConfig<'_>) -> Result<Self, ConfigError> {
        let c: Config = config.parse()?;
        let mut named: Vec<(String, String)> = Vec::new();
        match &c.detectors {
            None => named.extend(
                DETECTORS
                    .iter()
                    .map(|(n, r)| ((*n).to_owned(), (*r).to_owned())),
            ),
            Some(list) => {
                for (i, name) in list.iter().enumerate() {
                    let Some((n, r)) = DETECTORS.iter().find(|(n, _)| n == name) else {
                        let known: Vec<&str> = DETECTORS.iter().map(|(n, _)| *n).collect();
                        return Err(config.error_at(
                            &format!("detectors[{i}]"),
                            format!("unknown detector `{name}` (known: {})", known.join(", ")),
                        ));
                    };
                    named.push(((*n).to_owned(), (*r).to_owned()));
                }
            }
        }
        for (name, pattern) in &c.patterns {
            if let Err(e) = Regex::new(pattern) {
                return Err(
                    config.error_at(&format!("patterns.{name}"), format!("invalid regex: {e}"))
                );
            }
            named.push((name.clone(), pattern.clone()));
        }
        if named.is_empty() {
            return Err(config.error("no detector and no pattern: nothing to look for"));
        }
        if c.replacement.contains(['"', '\\']) {
            return Err(config.error_at("replacement", "must not contain `\"` or `\\`"));
        }
        let set = RegexSet::new(named.iter().map(|(_, r)| r))
            .map_err(|e| config.error(format!("invalid regex: {e}")))?;
        let regexes = named
            .iter()
            .map(|(_, r)| Regex::new(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| config.error(format!("invalid regex: {e}")))?;
        let prefilter = !named
            .iter()
            .any(|(_, r)| r.contains(['^', '$']) || r.contains("\\A") || r.contains("\\z"));
        Ok(Self {
            prefilter,
            action: c.action,
            names: named.into_iter().map(|(n, _)| n).collect(),
            set,
            regexes,
            replacement: c.replacement,
            code: c.code,
        })
    }

    /// The first detector matching any string of `value` (keys included).
    fn find(&self, value: &Value) -> Option<usize> {
        match value {
            Value::String(s) => self.set.matches(s).into_iter().next(),
            Value::Array(items) => items.iter().find_map(|v| self.find(v)),
            Value::Object(map) => map.iter().find_map(|(k, v)| {
                self.set
                    .matches(k)
                    .into_iter()
                    .next()
                    .or_else(|| self.find(v))
            }),
            _ => None,
        }
    }

    /// Replaces every match in every string (values and keys).
    fn redact(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.redact_str(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact(v)),
            Value::Object(map) => {
                for (mut key, mut v) in std::mem::take(map) {
                    self.redact_str(&mut key);
                    self.redact(&mut v);
                    map.insert(key, v);
                }
            }
            _ => {}
        }
    }

    fn redact_str(&self, s: &mut String) {
        if !self.set.is_match(s) {
            return;
        }
        for regex in &self.regexes {
            if let std::borrow::Cow::Owned(new) =
                regex.replace_all(s, regex::NoExpand(&self.replacement))
            {
                *s = new;
            }
        }
    }
}

impl Plugin for SecretFilter {
    fn call<'a>(
        &'a self,
        ctx: &'a PluginContext<'a>,
        payload: Option<&'a RawValue>,
    ) -> Verdict<'a> {
        let Some(payload) = payload else {
            return Verdict::allow();
        };
        let text = payload.get();
        // Without escapes the raw text holds the strings as they decode, so a miss here is final.
        if self.prefilter && !text.contains('\\') && !self.set.is_match(text) {
            return Verdict::allow();
        }
        let mut value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return Verdict::error(format!("payload is not JSON: {e}")),
        };
        let Some(found) = self.find(&value) else {
            return Verdict::allow();
        };
        match self.action {
            Action::Deny => {
                let what = if ctx.hook.is_pre() {
                    "arguments contain"
                } else {
                    "result contains"
                };
                Verdict::deny(mcp_core::ErrorObject::new(
                    self.code,
                    format!("Blocked: {what} a secret ({})", self.names[found]),
                ))
            }
            Action::Redact => {
                self.redact(&mut value);
                match serde_json::value::to_raw_value(&value) {
                    Ok(raw) => Verdict::rewrite(raw),
                    Err(e) => Verdict::error(format!("cannot re-encode the payload: {e}")),
                }
            }
        }
    }

    fn hooks(&self) -> HookSet {
        HookSet::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Decision, Hook};

    fn filter(config: Value) -> SecretFilter {
        SecretFilter::from_config(&PluginConfig::new("secrets", Some(&config))).expect("valid")
    }

    fn run(f: &SecretFilter, hook: Hook, payload: &str) -> Decision {
        let ctx = PluginContext::new(hook, "vh", "b", "t");
        let raw = RawValue::from_string(payload.to_owned()).expect("json");
        match f.call(&ctx, Some(&raw)) {
            Verdict::Ready(r) => r.expect("no plugin error"),
            Verdict::Later(_) => panic!("built-ins decide at once"),
        }
    }

    #[test]
    fn denies_cloud_keys_and_escaped_ones() {
        let f = filter(serde_json::json!({}));
        match run(
            &f,
            Hook::ToolPreInvoke,
            r#"{"k":"id AKIAABCDEFGHIJKLMNOP here"}"#,
        ) {
            Decision::Deny(e) => {
                assert_eq!(e.code, -32600);
                assert_eq!(
                    e.message,
                    "Blocked: arguments contain a secret (aws_access_key)"
                );
            }
            other => panic!("{other:?}"),
        }
        // `\u0041` is `A`: the raw text does not match, the decoded string does.
        assert!(matches!(
            run(&f, Hook::ToolPostInvoke, r#"{"k":"\u0041KIAABCDEFGHIJKLMNOP"}"#),
            Decision::Deny(e) if e.message == "Blocked: result contains a secret (aws_access_key)"
        ));
        assert!(matches!(
            run(&f, Hook::ToolPreInvoke, r#"{"k":"AKIA-not-a-key"}"#),
            Decision::Allow
        ));
    }

    #[test]
    fn redacts_private_keys_inside_nested_strings() {
        let f = filter(serde_json::json!({"action": "redact"}));
        let payload = serde_json::json!({
            "content": [{"type": "text", "text": "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nbye"}],
            "n": 1,
            "AKIAABCDEFGHIJKLMNOP": "as a key"
        })
        .to_string();
        match run(&f, Hook::ToolPostInvoke, &payload) {
            Decision::Rewrite(raw) => {
                let v: Value = serde_json::from_str(raw.get()).expect("json");
                assert_eq!(v["content"][0]["text"], "key:\n[REDACTED]\nbye");
                assert_eq!(v["n"], 1);
                assert_eq!(v["[REDACTED]"], "as a key");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn custom_patterns_and_config_errors() {
        let f =
            filter(serde_json::json!({"detectors": [], "patterns": {"ticket": "TICKET-[0-9]{3}"}}));
        assert!(matches!(
            run(&f, Hook::PromptPreFetch, r#"{"q":"see TICKET-123"}"#),
            Decision::Deny(e) if e.message.ends_with("(ticket)")
        ));
        assert!(matches!(
            run(&f, Hook::PromptPreFetch, r#"{"q":"AKIAABCDEFGHIJKLMNOP"}"#),
            Decision::Allow
        ));
        // Anchored patterns match the decoded strings, not the JSON text around them.
        let f = filter(serde_json::json!({"detectors": [], "patterns": {"whole": "^secret$"}}));
        assert!(matches!(
            run(&f, Hook::ToolPreInvoke, r#"{"a":"secret"}"#),
            Decision::Deny(_)
        ));
        assert!(matches!(
            run(&f, Hook::ToolPreInvoke, r#"{"a":"no secret"}"#),
            Decision::Allow
        ));
        let bad = serde_json::json!({"patterns": {"x": "("}});
        let err =
            SecretFilter::from_config(&PluginConfig::new("s", Some(&bad))).expect_err("bad regex");
        assert!(
            err.to_string()
                .starts_with("plugins[0].config.patterns.x: invalid regex"),
            "{err}"
        );
        let bad = serde_json::json!({"detectors": ["aws_access_key", "nope"]});
        let err = SecretFilter::from_config(&PluginConfig::new("s", Some(&bad)))
            .expect_err("bad detector");
        assert!(
            err.to_string()
                .starts_with("plugins[0].config.detectors[1]: unknown detector `nope`"),
            "{err}"
        );
    }
}
