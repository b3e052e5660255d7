//! Checks of user configurations beyond the store's own validation: stdio backends whose command
//! is not on the operator's allow-list (`backends.stdio_allowed_commands`), backend `breaker` overrides that do
//! not apply, and overlapping backend names (a warning when serving, an error for
//! `mcp-gateway check-config`, DESIGN §5).

use mcp_breaker::BreakerConfig;
use mcp_config_store::{UserConfig, UsersDocument};

/// One finding in a user configuration document: the field path and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserConfigFinding {
    /// Path of the field, e.g. `users.alice.virtual_hosts.vh1.backends.b.command`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for UserConfigFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Stdio backends whose `command` is not in `stdio_allowed` (the operator's
/// `backends.stdio_allowed_commands`: a user configuration alone never starts a program) and
/// backend `breaker` overrides that do not apply over `breaker` (the process's `[breaker]`
/// defaults); using them is an error (never silently ignored).
pub fn unsupported_features(
    prefix: &str,
    config: &UserConfig,
    breaker: &BreakerConfig,
    stdio_allowed: &[String],
) -> Vec<UserConfigFinding> {
    let mut out = Vec::new();
    for (vhost_id, vhost) in &config.virtual_hosts {
        let vh = join(&join(prefix, "virtual_hosts"), vhost_id);
        for (name, backend) in &vhost.backends {
            let b = join(&join(&vh, "backends"), name);
            if let Some(command) = &backend.command
                && !stdio_allowed.contains(command)
            {
                out.push(UserConfigFinding {
                    path: join(&b, "command"),
                    message: format!(
                        "`{command}` is not in backends.stdio_allowed_commands (the operator's allow-list of stdio backend programs)"
                    ),
                });
            }
            if let Some(overrides) = &backend.breaker
                && let Err(e) = breaker.with_overrides(overrides)
            {
                out.push(UserConfigFinding {
                    path: join(&b, "breaker"),
                    message: e.to_string(),
                });
            }
        }
    }
    out
}

/// The errors ([`unsupported_features`]) and the warnings (overlapping backend names) of a users
/// document.
pub fn check_document(
    doc: &UsersDocument,
    breaker: &BreakerConfig,
    stdio_allowed: &[String],
) -> (Vec<UserConfigFinding>, Vec<UserConfigFinding>) {
    let mut errors = Vec::new();
    for (subject, config) in &doc.users {
        errors.extend(unsupported_features(
            &join("users", subject),
            config,
            breaker,
            stdio_allowed,
        ));
    }
    let warnings = doc
        .warnings()
        .into_iter()
        .map(|w| UserConfigFinding {
            path: w.path().to_owned(),
            message: w.message().to_owned(),
        })
        .collect();
    (errors, warnings)
}

fn join(prefix: &str, key: &str) -> String {
    let simple = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    let key = if simple {
        key.to_owned()
    } else {
        serde_json::to_string(key).unwrap_or_else(|_| key.to_owned())
    };
    if prefix.is_empty() {
        key
    } else {
        format!("{prefix}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_unsupported_features_with_paths() {
        let doc = UsersDocument::from_json_str(
            r#"{"users":{"alice":{"virtual_hosts":{"vh":{"sse_downstream":true,"backends":{
                "a":{"url":"http://127.0.0.1:1/mcp","replicas":["http://127.0.0.1:2/mcp"],"transport":"sse"},
                "a-b":{"command":"npx"},
                "c":{"url":"http://127.0.0.1:3/mcp","breaker":{"open_ms":1}},
                "d":{"url":"http://127.0.0.1:4/mcp","breaker":{"opne_ms":1}}}}}}}}"#,
        )
        .expect("valid document");
        let (errors, warnings) = check_document(&doc, &BreakerConfig::default(), &[]);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        // `sse_downstream` is served (the SSE bridge) and so is `transport = "sse"` (HTTP+SSE
        // backends): the document's `true` and `"sse"` are no findings.
        assert_eq!(text.len(), 2, "{text:?}");
        assert_eq!(
            text[0],
            "users.alice.virtual_hosts.vh.backends.a-b.command: `npx` is not in backends.stdio_allowed_commands (the operator's allow-list of stdio backend programs)"
        );
        assert!(
            text[1].starts_with("users.alice.virtual_hosts.vh.backends.d.breaker: "),
            "{text:?}"
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].message.contains("a-b"), "{warnings:?}");
    }
}
