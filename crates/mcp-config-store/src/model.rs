//! The user configuration model (book: docs/src/user-config.md): what one JWT subject may reach.
//!
//! A [`UserConfig`] maps virtual host ids to [`VirtualHostConfig`]s, each of which maps backend
//! names to [`BackendConfig`]s. Every struct rejects unknown keys (a typo is an error, not a silently
//! ignored setting). Parse with [`UserConfig::from_json_str`] (or `from_toml_str` with the `file`
//! feature): syntax and type errors and the semantic checks of [`UserConfig::validate`] are reported
//! with the path of the offending field.
//!
//! ```
//! use mcp_config_store::{Naming, UserConfig};
//!
//! let cfg = UserConfig::from_json_str(r#"{ "virtual_hosts": { "vh1": {
//!     "backends": {
//!         "weather": { "url": "http://127.0.0.1:9001/mcp", "timeout_ms": 5000 },
//!         "files":   { "command": "mcp-files", "args": ["--root", "/srv"] }
//!     } } } }"#).unwrap();
//! let vh = &cfg.virtual_hosts["vh1"];
//! assert_eq!(vh.naming, Naming::Prefix);
//! assert_eq!(vh.backends["weather"].timeout_ms, 5000);
//! assert_eq!(vh.backends["files"].command.as_deref(), Some("mcp-files"));
//! assert!(cfg.warnings().is_empty());
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::error::ConfigError;
use crate::parse::{self, DocumentFormat};
use crate::validate::{self, ConfigWarning};

/// Default per-backend request timeout (`timeout_ms`), 30 s.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The routing data of one subject: its virtual hosts by id.
///
/// Virtual hosts are kept behind `Arc` so that the per-request
/// [`VirtualHost`](crate::VirtualHost) extension is a reference-count increment, not a copy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UserConfig {
    /// Virtual hosts by id (the `{virtual_host_id}` of `/servers/{virtual_host_id}/mcp`).
    pub virtual_hosts: BTreeMap<String, Arc<VirtualHostConfig>>,
}

/// One virtual host: a set of backends presented to the client as one MCP server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct VirtualHostConfig {
    /// How public tool and prompt names are formed (default [`Naming::Prefix`]).
    #[serde(default)]
    pub naming: Naming,
    /// Backends by name; the name is the public prefix (`<backend>-<tool>`).
    pub backends: BTreeMap<String, BackendConfig>,
    /// Also serve the 2024-11-05 SSE transport at `/servers/{vhost}/sse` (default `false`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sse_downstream: bool,
    /// Ask for tool arguments and results (and prompt arguments, resource contents) in the
    /// gateway's audit trail for this virtual host (default `false`). Honoured only where the
    /// operator allows payload recording; otherwise records never carry payloads.
    #[serde(default, skip_serializing_if = "is_false")]
    pub audit_payloads: bool,
}

/// Public naming scheme of a virtual host (book: docs/src/architecture.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Naming {
    /// Always `<backend>-<name>` (the default).
    #[default]
    Prefix,
    /// Names unchanged when the virtual host has exactly one backend, prefixed otherwise.
    Auto,
}

/// One backend MCP server: reached over HTTP (`url`), or a stdio process: an entry of the operator's
/// catalog (`stdio`, the gateway's `[stdio_servers.NAME]`) or a free-form `command` (only when the
/// operator allows it). Exactly one of the three is set (checked by validation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BackendConfig {
    /// Endpoint of an HTTP backend (`http` or `https`).
    #[serde(
        default,
        deserialize_with = "parse::de_opt_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub url: Option<Url>,
    /// Failover endpoints in priority order (HTTP backends only).
    #[serde(
        default,
        deserialize_with = "parse::de_url_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub replicas: Vec<Url>,
    /// Header policy towards this backend (HTTP backends only).
    #[serde(default, skip_serializing_if = "HeaderPolicy::is_empty")]
    pub headers: HeaderPolicy,
    /// Per-request timeout in milliseconds (default [`DEFAULT_TIMEOUT_MS`]; must be positive).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Longest a whole call may take, in milliseconds, however steadily the backend keeps
    /// sending (`timeout_ms` bounds only each wait); unset: the gateway's default. The
    /// gateway's ceiling caps it (must be positive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Public name -> upstream name overrides.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, String>,
    /// Upstream tool names this backend may expose; `None` (or JSON `null`) allows all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Name of an operator-defined stdio server (the gateway's `[stdio_servers.NAME]`), instead of
    /// `url` or `command`: the operator fixes its program, arguments, environment and sharing;
    /// the user configuration may only set the `env` keys the entry lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdio: Option<String>,
    /// Program of a free-form stdio backend (instead of `url`); refused unless the operator
    /// allows free-form commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments of a stdio backend.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment of a stdio backend.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory of a stdio backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Whether a free-form stdio process is shared or started per principal. Unset means per
    /// principal; `shared` is honoured only where the operator trusts config authors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdio_policy: Option<StdioPolicy>,
    /// Idle timeout in seconds after which an unused upstream is closed (must be positive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_s: Option<u64>,
    /// Upstream transport of an HTTP backend (default streamable HTTP).
    #[serde(default, skip_serializing_if = "Transport::is_default")]
    pub transport: Transport,
    /// Overrides of the process-wide `[breaker]` settings, kept as a JSON object; the breaker crate
    /// gives the keys their types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            url: None,
            replicas: Vec::new(),
            headers: HeaderPolicy::default(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            deadline_ms: None,
            aliases: BTreeMap::new(),
            allowed_tools: None,
            stdio: None,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            stdio_policy: None,
            idle_timeout_s: None,
            transport: Transport::default(),
            breaker: None,
        }
    }
}

impl BackendConfig {
    /// An HTTP backend at `url` with every other setting at its default.
    pub fn http(url: Url) -> Self {
        Self {
            url: Some(url),
            ..Self::default()
        }
    }

    /// A stdio backend from the operator's catalog entry `name`, every other setting at its default.
    pub fn catalog(name: impl Into<String>) -> Self {
        Self {
            stdio: Some(name.into()),
            ..Self::default()
        }
    }

    /// A free-form stdio backend running `command` with every other setting at its default.
    pub fn stdio(command: impl Into<String>) -> Self {
        Self {
            command: Some(command.into()),
            ..Self::default()
        }
    }
}

/// Which client headers reach a backend and which are added or removed (book: docs/src/architecture.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct HeaderPolicy {
    /// Client request headers forwarded to the backend (names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passthrough: Vec<String>,
    /// Headers added to every upstream request (name -> value), e.g. backend credentials.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    /// Headers removed from upstream requests (names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl HeaderPolicy {
    /// Whether no header rule is configured.
    pub fn is_empty(&self) -> bool {
        self.passthrough.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// Lifetime of a stdio backend process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StdioPolicy {
    /// One process shared by every principal (an operator's opt-in).
    Shared,
    /// One process per principal (the default).
    #[default]
    PerPrincipal,
}

impl StdioPolicy {
    /// The policy's name in configuration documents (`shared`, `per_principal`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::PerPrincipal => "per_principal",
        }
    }
}

/// Upstream transport of an HTTP backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Transport {
    /// Streamable HTTP (the default).
    #[default]
    StreamableHttp,
    /// The 2024-11-05 HTTP+SSE transport.
    Sse,
}

impl Transport {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl UserConfig {
    /// Parses and validates a JSON document.
    ///
    /// # Errors
    ///
    /// Syntax, type and unknown-key errors (one [`FieldError`](crate::FieldError) with the path),
    /// or every semantic problem found by [`validate`](Self::validate).
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        Self::from_json_slice(text.as_bytes())
    }

    /// Parses and validates a JSON document given as bytes (e.g. a Redis value).
    ///
    /// # Errors
    ///
    /// As [`from_json_str`](Self::from_json_str).
    pub fn from_json_slice(bytes: &[u8]) -> Result<Self, ConfigError> {
        let cfg: Self = parse::json(bytes)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses and validates a TOML document.
    ///
    /// # Errors
    ///
    /// As [`from_json_str`](Self::from_json_str).
    #[cfg(feature = "file")]
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let cfg: Self = parse::toml(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Runs the semantic checks (names, URL schemes, exactly one of `url`/`command`, ...) on a
    /// configuration built in code. The `from_*` constructors call this already.
    ///
    /// # Errors
    ///
    /// Every problem found, each with its path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        validate::user_config(self, "", &mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::from_errors(errors))
        }
    }

    /// Problems that do not make the configuration unusable but deserve an operator's attention:
    /// overlapping backend names (`a` and `a-b` in one virtual host make a public name such as
    /// `a-b-x` ambiguous). Stores log them when they load a configuration.
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut out = Vec::new();
        validate::user_config_warnings(self, "", &mut out);
        out
    }

    /// The configuration as compact JSON (the form [`RedisStore`](crate::RedisStore) stores).
    pub fn to_json(&self) -> String {
        // Every field is a string, number, bool, URL, map or list: serialisation cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

/// A document holding many subjects' configurations: `{ "users": { "<sub>": <UserConfig> } }`.
///
/// The form of [`FileStore`](crate::FileStore) files and of the embedded default configuration.
///
/// ```
/// use mcp_config_store::UsersDocument;
///
/// let doc = UsersDocument::from_json_str(r#"{ "users": { "alice": { "virtual_hosts": {} } } }"#).unwrap();
/// assert!(doc.users.contains_key("alice"));
///
/// let err = UsersDocument::from_json_str(
///     r#"{ "users": { "alice": { "virtual_hosts": { "v": { "backends": { "b": {} } } } } } }"#,
/// ).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     r#"users.alice.virtual_hosts.v.backends.b: exactly one of "url", "stdio" or "command" is required"#
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UsersDocument {
    /// Configurations by subject (`sub` claim).
    pub users: BTreeMap<String, Arc<UserConfig>>,
}

impl UsersDocument {
    /// Parses and validates a JSON document.
    ///
    /// # Errors
    ///
    /// As [`UserConfig::from_json_str`], with paths starting at `users.<sub>`.
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        Self::parse(text, DocumentFormat::Json)
    }

    /// Parses and validates a TOML document (`[users.alice.virtual_hosts.vh1.backends.b]` ...).
    ///
    /// # Errors
    ///
    /// As [`from_json_str`](Self::from_json_str).
    #[cfg(feature = "file")]
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        Self::parse(text, DocumentFormat::Toml)
    }

    /// Parses and validates a document of the given format.
    ///
    /// # Errors
    ///
    /// As [`from_json_str`](Self::from_json_str).
    pub fn parse(text: &str, format: DocumentFormat) -> Result<Self, ConfigError> {
        let doc: Self = match format {
            DocumentFormat::Json => parse::json(text.as_bytes())?,
            #[cfg(feature = "file")]
            DocumentFormat::Toml => parse::toml(text)?,
        };
        doc.validate()?;
        Ok(doc)
    }

    /// Semantic checks of every user's configuration (paths start at `users.<sub>`).
    ///
    /// # Errors
    ///
    /// Every problem found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        for (sub, cfg) in &self.users {
            if sub.is_empty() {
                errors.push(crate::error::FieldError::new(
                    "users",
                    "a subject must not be empty",
                ));
            }
            validate::user_config(cfg, &validate::join("users", sub), &mut errors);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::from_errors(errors))
        }
    }

    /// Warnings of every user's configuration (paths start at `users.<sub>`).
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut out = Vec::new();
        for (sub, cfg) in &self.users {
            validate::user_config_warnings(cfg, &validate::join("users", sub), &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const FULL: &str = r#"{ "virtual_hosts": {
        "vh1": {
            "naming": "auto",
            "sse_downstream": true,
            "audit_payloads": true,
            "backends": {
                "weather": {
                    "url": "http://127.0.0.1:9001/mcp",
                    "replicas": ["http://127.0.0.1:9002/mcp", "https://backup.example/mcp"],
                    "headers": {
                        "passthrough": ["x-request-id"],
                        "add": { "x-api-key": "k-123" },
                        "remove": ["cookie"]
                    },
                    "timeout_ms": 5000,
                    "aliases": { "forecast": "get_forecast" },
                    "allowed_tools": null,
                    "idle_timeout_s": 300,
                    "transport": "sse",
                    "breaker": { "consecutive_failures": 3, "open_ms": 1000 }
                },
                "files": {
                    "command": "mcp-files",
                    "args": ["--root", "/srv"],
                    "env": { "RUST_LOG": "info" },
                    "cwd": "/srv",
                    "stdio_policy": "per_principal",
                    "allowed_tools": ["read", "list"]
                }
            }
        },
        "vh2": { "backends": {} }
    } }"#;

    #[test]
    fn full_example_parses_with_every_key() {
        let cfg = UserConfig::from_json_str(FULL).unwrap();
        let vh1 = &cfg.virtual_hosts["vh1"];
        assert_eq!(vh1.naming, Naming::Auto);
        assert!(vh1.sse_downstream);
        assert!(vh1.audit_payloads);

        let w = &vh1.backends["weather"];
        assert_eq!(
            w.url.as_ref().unwrap().as_str(),
            "http://127.0.0.1:9001/mcp"
        );
        assert_eq!(w.replicas.len(), 2);
        assert_eq!(w.replicas[1].as_str(), "https://backup.example/mcp");
        assert_eq!(w.headers.passthrough, ["x-request-id"]);
        assert_eq!(w.headers.add["x-api-key"], "k-123");
        assert_eq!(w.headers.remove, ["cookie"]);
        assert_eq!(w.timeout_ms, 5000);
        assert_eq!(w.aliases["forecast"], "get_forecast");
        assert_eq!(w.allowed_tools, None);
        assert_eq!(w.idle_timeout_s, Some(300));
        assert_eq!(w.transport, Transport::Sse);
        assert_eq!(w.breaker.as_ref().unwrap()["consecutive_failures"], 3);
        assert_eq!(w.command, None);

        let f = &vh1.backends["files"];
        assert_eq!(f.command.as_deref(), Some("mcp-files"));
        assert_eq!(f.args, ["--root", "/srv"]);
        assert_eq!(f.env["RUST_LOG"], "info");
        assert_eq!(f.cwd.as_deref(), Some(std::path::Path::new("/srv")));
        assert_eq!(f.stdio_policy, Some(StdioPolicy::PerPrincipal));
        assert_eq!(f.allowed_tools.as_deref().unwrap(), ["read", "list"]);
        assert_eq!(f.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(f.transport, Transport::StreamableHttp);

        let vh2 = &cfg.virtual_hosts["vh2"];
        assert_eq!(vh2.naming, Naming::Prefix);
        assert!(!vh2.sse_downstream);
        assert!(!vh2.audit_payloads);
        assert!(cfg.warnings().is_empty());
    }

    #[test]
    fn json_round_trip_is_lossless() {
        let cfg = UserConfig::from_json_str(FULL).unwrap();
        let again = UserConfig::from_json_str(&cfg.to_json()).unwrap();
        assert_eq!(cfg, again);
    }

    fn err(json: &str) -> String {
        UserConfig::from_json_str(json).unwrap_err().to_string()
    }

    fn backend(body: &str) -> String {
        format!(r#"{{"virtual_hosts":{{"vh1":{{"backends":{{"w":{body}}}}}}}}}"#)
    }

    #[test]
    fn type_and_syntax_errors_name_the_field() {
        assert_eq!(
            err(r#"{"virtual_hosts":{"vh1":{"backends":{"weather":{"url":"weather"}}}}}"#),
            "virtual_hosts.vh1.backends.weather.url: relative URL without a base"
        );
        assert_eq!(
            err(&backend(
                r#"{"url":"http://a/","replicas":["http://b/","nope"]}"#
            )),
            "virtual_hosts.vh1.backends.w.replicas[1]: relative URL without a base"
        );
        assert_eq!(
            err(&backend(r#"{"url":"http://a/","timeout_ms":"x"}"#)),
            r#"virtual_hosts.vh1.backends.w.timeout_ms: invalid type: string "x", expected u64"#
        );
        let unknown = err(&backend(r#"{"urls":"http://a/"}"#));
        assert!(
            unknown.starts_with(
                "virtual_hosts.vh1.backends.w.urls: unknown field `urls`, expected one of"
            ),
            "{unknown}"
        );
        let extra = err(r#"{"virtual_hosts":{},"extra":1}"#);
        assert!(extra.starts_with("extra: unknown field `extra`"), "{extra}");
        assert_eq!(
            err(r#"{"virtual_hosts":{"vh1":{"naming":"suffix","backends":{}}}}"#),
            "virtual_hosts.vh1.naming: unknown variant `suffix`, expected `prefix` or `auto`"
        );
        assert_eq!(
            err(&backend(
                r#"{"url":"http://a/","stdio_policy":"sometimes"}"#
            )),
            "virtual_hosts.vh1.backends.w.stdio_policy: unknown variant `sometimes`, expected `shared` or `per_principal`"
        );
        assert_eq!(
            err(&backend(r#"{"url":"http://a/","headers":{"add":{"x":1}}}"#)),
            "virtual_hosts.vh1.backends.w.headers.add.x: invalid type: integer `1`, expected a string"
        );
        assert_eq!(
            err(r#"{"virtual_hosts":{"vh1":{}}}"#),
            "virtual_hosts.vh1: missing field `backends`"
        );
        assert_eq!(err("{}"), "missing field `virtual_hosts`");

        let syntax = UserConfig::from_json_str("{\n  \"virtual_hosts\": {,}\n}").unwrap_err();
        let e = &syntax.errors()[0];
        // serde_path_to_error marks the unknown map key it was about to read with `?`.
        assert!(e.path().starts_with("virtual_hosts"), "{e}");
        assert_eq!(e.line(), Some(2));
        assert!(e.message().contains("at line 2 column"), "{e}");

        let trailing = err(r#"{"virtual_hosts":{}} x"#);
        assert!(trailing.starts_with("trailing characters"), "{trailing}");
    }

    #[test]
    fn url_errors_do_not_echo_the_value() {
        // A URL may carry credentials; errors end up in logs.
        let e = err(&backend(r#"{"url":"http://user:s3cret@[bad/"}"#));
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.starts_with("virtual_hosts.vh1.backends.w.url: "), "{e}");
    }

    #[test]
    fn semantic_errors_are_reported_after_parsing() {
        assert_eq!(
            err(&backend("{}")),
            r#"virtual_hosts.vh1.backends.w: exactly one of "url", "stdio" or "command" is required"#
        );
    }

    #[test]
    fn overlapping_backend_names_are_warnings_not_errors() {
        let cfg = UserConfig::from_json_str(
            r#"{"virtual_hosts":{"vh1":{"backends":{
                "a":{"url":"http://a/"},
                "a-a":{"url":"http://a/"},
                "a-b":{"url":"http://a/"},
                "ab":{"url":"http://a/"},
                "a-b-c":{"url":"http://a/"}
            }}}}"#,
        )
        .unwrap();
        let warnings: Vec<String> = cfg.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                r#"virtual_hosts.vh1.backends: backend names "a" and "a-a" overlap: a public name starting with "a-a-" could belong to either"#,
                r#"virtual_hosts.vh1.backends: backend names "a" and "a-b" overlap: a public name starting with "a-b-" could belong to either"#,
                r#"virtual_hosts.vh1.backends: backend names "a" and "a-b-c" overlap: a public name starting with "a-b-c-" could belong to either"#,
                r#"virtual_hosts.vh1.backends: backend names "a-b" and "a-b-c" overlap: a public name starting with "a-b-c-" could belong to either"#,
            ]
        );
    }

    #[cfg(feature = "file")]
    #[test]
    fn toml_form_parses_and_reports_paths() {
        let cfg = UserConfig::from_toml_str(
            r#"
[virtual_hosts.vh1]
naming = "auto"
[virtual_hosts.vh1.backends.weather]
url = "http://127.0.0.1:9001/mcp"
replicas = ["http://127.0.0.1:9002/mcp"]
headers = { passthrough = ["x-trace"], add = { "x-key" = "v" } }
[virtual_hosts.vh1.backends.weather.breaker]
consecutive_failures = 2
"#,
        )
        .unwrap();
        let w = &cfg.virtual_hosts["vh1"].backends["weather"];
        assert_eq!(w.replicas.len(), 1);
        assert_eq!(w.headers.add["x-key"], "v");
        assert_eq!(w.breaker.as_ref().unwrap()["consecutive_failures"], 2);

        let e =
            UserConfig::from_toml_str("[virtual_hosts.vh1.backends.weather]\nurl = \"weather\"\n")
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "virtual_hosts.vh1.backends.weather.url: relative URL without a base"
        );
        assert_eq!(e.errors()[0].line(), Some(2));

        let e = UserConfig::from_toml_str("[virtual_hosts\n").unwrap_err();
        assert_eq!(e.errors()[0].path(), "");
        assert!(e.to_string().contains("at line 1 column"), "{e}");

        let e = UserConfig::from_toml_str("[virtual_hosts.v.backends.b]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"virtual_hosts.v.backends.b: exactly one of "url", "stdio" or "command" is required"#
        );
    }

    #[test]
    fn users_document_prefixes_paths_with_the_subject() {
        let e = UsersDocument::from_json_str(
            r#"{"users":{"alice":{"virtual_hosts":{"v":{"backends":{"b":{"url":"x"}}}}}}}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "users.alice.virtual_hosts.v.backends.b.url: relative URL without a base"
        );
        let doc = UsersDocument::from_json_str(
            r#"{"users":{"alice":{"virtual_hosts":{"v":{"backends":{"a":{"url":"http://x/"},"a-b":{"url":"http://x/"}}}}}}}"#,
        )
        .unwrap();
        assert_eq!(doc.warnings().len(), 1);
        assert_eq!(
            doc.warnings()[0].path(),
            "users.alice.virtual_hosts.v.backends"
        );
    }
}
