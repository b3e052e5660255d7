//! Checks of user configurations beyond the store's own validation, against the operator's
//! settings ([`OperatorRules`]): stdio backends the operator's rules do not allow
//! (`[stdio_servers]`, `backends.stdio_allowed_commands`, `backends.trust_user_commands`),
//! `headers.passthrough` of `Authorization` without `backends.allow_authorization_passthrough`,
//! backend `breaker` overrides that do not apply, more backends in one virtual host than
//! `limits.max_backends_per_vhost` (each is one more upstream request per fan-out), and
//! overlapping backend names (a warning when serving, an error for `mcp-gateway check-config`,
//! book: docs/src/architecture.md).

use mcp_breaker::BreakerConfig;
use mcp_config_store::{BackendConfig, UserConfig, UsersDocument};
use mcp_router::StdioRules;

use crate::config::GatewayConfig;

/// What the operator lets user configurations do.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OperatorRules {
    /// The process's `[breaker]` defaults (a backend's overrides must apply over them).
    pub breaker: BreakerConfig,
    /// What stdio backends may run.
    pub stdio: StdioRules,
    /// `backends.allow_authorization_passthrough`.
    pub allow_authorization_passthrough: bool,
    /// `limits.max_backends_per_vhost`: most backends of one virtual host.
    pub max_backends_per_vhost: usize,
}

/// The default of `limits.max_backends_per_vhost`.
pub const DEFAULT_MAX_BACKENDS_PER_VHOST: usize = 64;

impl Default for OperatorRules {
    fn default() -> Self {
        Self {
            breaker: BreakerConfig::default(),
            stdio: StdioRules::default(),
            allow_authorization_passthrough: false,
            max_backends_per_vhost: DEFAULT_MAX_BACKENDS_PER_VHOST,
        }
    }
}

impl OperatorRules {
    /// The rules of a process configuration.
    pub fn from_config(config: &GatewayConfig) -> Self {
        Self {
            breaker: config.breaker.clone(),
            stdio: config.backends.stdio_rules(),
            allow_authorization_passthrough: config.backends.allow_authorization_passthrough,
            max_backends_per_vhost: config.limits.max_backends_per_vhost,
        }
    }
}

/// One finding in a user configuration document: the field path and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

/// What `config` asks that `rules` do not allow: stdio backends the stdio rules refuse,
/// `Authorization` in `headers.passthrough` without the operator's opt-in, backend `breaker`
/// overrides that do not apply over the `[breaker]` defaults. Using them is an error (never
/// silently ignored).
pub fn unsupported_features(
    prefix: &str,
    config: &UserConfig,
    rules: &OperatorRules,
) -> Vec<UserConfigFinding> {
    let mut out = Vec::new();
    for (id, vhost) in &config.virtual_hosts {
        if vhost.backends.len() > rules.max_backends_per_vhost {
            out.push(UserConfigFinding {
                path: join(&join(&join(prefix, "virtual_hosts"), id), "backends"),
                message: format!(
                    "{} backends; the operator allows at most {} in one virtual host \
                     (limits.max_backends_per_vhost)",
                    vhost.backends.len(),
                    rules.max_backends_per_vhost
                ),
            });
        }
    }
    for (path, backend) in backends(prefix, config) {
        if is_stdio(backend) {
            for refusal in rules.stdio.check(backend) {
                out.push(finding(&path, &refusal.field, refusal.message));
            }
        }
        if !rules.allow_authorization_passthrough {
            for (i, name) in backend.headers.passthrough.iter().enumerate() {
                if name.eq_ignore_ascii_case("authorization") {
                    out.push(finding(
                        &path,
                        &format!("headers.passthrough[{i}]"),
                        "forwarding the caller's Authorization header (its gateway token) to a backend is refused; the operator allows it with backends.allow_authorization_passthrough = true".to_owned(),
                    ));
                }
            }
        }
        if let Some(overrides) = &backend.breaker
            && let Err(e) = rules.breaker.with_overrides(overrides)
        {
            out.push(finding(&path, "breaker", e.to_string()));
        }
    }
    out
}

/// What works in `config` but deserves the operator's attention: free-form stdio commands
/// admitted by the older allow-list, a `stdio_policy = "shared"` that is not honoured.
pub fn operator_warnings(
    prefix: &str,
    config: &UserConfig,
    rules: &OperatorRules,
) -> Vec<UserConfigFinding> {
    let mut out = Vec::new();
    for (path, backend) in backends(prefix, config) {
        if is_stdio(backend) && rules.stdio.check(backend).is_empty() {
            for warning in rules.stdio.warnings(backend) {
                out.push(finding(&path, &warning.field, warning.message));
            }
        }
    }
    out
}

/// The errors ([`unsupported_features`]) and the warnings (overlapping backend names, an error
/// for `check-config`) of a users document.
pub fn check_document(
    doc: &UsersDocument,
    rules: &OperatorRules,
) -> (Vec<UserConfigFinding>, Vec<UserConfigFinding>) {
    let mut errors = Vec::new();
    for (subject, config) in &doc.users {
        errors.extend(unsupported_features(&join("users", subject), config, rules));
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

/// The [`operator_warnings`] of every configuration of a users document (never errors, not even
/// for `check-config`: old configurations keep loading).
pub fn document_notices(doc: &UsersDocument, rules: &OperatorRules) -> Vec<UserConfigFinding> {
    doc.users
        .iter()
        .flat_map(|(subject, config)| operator_warnings(&join("users", subject), config, rules))
        .collect()
}

fn is_stdio(backend: &BackendConfig) -> bool {
    backend.command.is_some() || backend.stdio.is_some()
}

/// Every backend of `config` with its path.
fn backends<'a>(
    prefix: &str,
    config: &'a UserConfig,
) -> impl Iterator<Item = (String, &'a BackendConfig)> {
    let hosts = join(prefix, "virtual_hosts");
    config.virtual_hosts.iter().flat_map(move |(id, vhost)| {
        let vh = join(&join(&hosts, id), "backends");
        vhost
            .backends
            .iter()
            .map(move |(name, backend)| (join(&vh, name), backend))
    })
}

fn finding(backend: &str, field: &str, message: String) -> UserConfigFinding {
    UserConfigFinding {
        path: format!("{backend}.{field}"),
        message,
    }
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
    fn more_backends_than_the_operator_allows_in_one_vhost_is_an_error() {
        let doc = UsersDocument::from_json_str(
            r#"{"users":{"alice":{"virtual_hosts":{
                "few":{"backends":{"a":{"url":"http://127.0.0.1:1/mcp"},"b":{"url":"http://127.0.0.1:2/mcp"}}},
                "many":{"backends":{"a":{"url":"http://127.0.0.1:1/mcp"},"b":{"url":"http://127.0.0.1:2/mcp"},
                    "c":{"url":"http://127.0.0.1:3/mcp"}}}}}}}"#,
        )
        .expect("valid document");
        let rules = OperatorRules {
            max_backends_per_vhost: 2,
            ..OperatorRules::default()
        };
        let (errors, _) = check_document(&doc, &rules);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "users.alice.virtual_hosts.many.backends: 3 backends; the operator allows at most 2 in one virtual host (limits.max_backends_per_vhost)"
            ]
        );
        assert!(check_document(&doc, &OperatorRules::default()).0.is_empty());
    }

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
        let (errors, warnings) = check_document(&doc, &OperatorRules::default());
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        // `sse_downstream` is served (the SSE bridge) and so is `transport = "sse"` (HTTP+SSE
        // backends): the document's `true` and `"sse"` are no findings.
        assert_eq!(text.len(), 2, "{text:?}");
        assert_eq!(
            text[0],
            "users.alice.virtual_hosts.vh.backends.a-b.command: free-form stdio commands are refused: define a [stdio_servers.NAME] entry in the gateway configuration and write \"stdio\": \"NAME\" instead, or the operator sets backends.trust_user_commands = true"
        );
        assert!(
            text[1].starts_with("users.alice.virtual_hosts.vh.backends.d.breaker: "),
            "{text:?}"
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].message.contains("a-b"), "{warnings:?}");
    }

    #[test]
    fn authorization_passthrough_needs_the_operator() {
        let doc = UsersDocument::from_json_str(
            r#"{"users":{"alice":{"virtual_hosts":{"vh":{"backends":{
                "a":{"url":"http://127.0.0.1:1/mcp","headers":{"passthrough":["x-trace","AUTHORIZATION"]}}}}}}}}"#,
        )
        .expect("valid document");
        let (errors, _) = check_document(&doc, &OperatorRules::default());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            errors[0].path,
            "users.alice.virtual_hosts.vh.backends.a.headers.passthrough[1]"
        );
        assert!(
            errors[0]
                .message
                .contains("backends.allow_authorization_passthrough = true"),
            "{errors:?}"
        );
        let allowed = OperatorRules {
            allow_authorization_passthrough: true,
            ..OperatorRules::default()
        };
        assert!(check_document(&doc, &allowed).0.is_empty());
    }
}
