//! Semantic validation of the model, with the path of every problem, and warnings.
//!
//! Rules (each error names the path of the offending field):
//!
//! | rule | path | message |
//! |---|---|---|
//! | virtual host id: 1–128 characters from `A-Z a-z 0-9 - _ . ~`, not `.` or `..` | `virtual_hosts.<id>` | `invalid virtual host id: ...` |
//! | backend name: 1–64 characters from `A-Z a-z 0-9 - _ .`, starting with a letter or digit | `...backends.<name>` | `invalid backend name: ...` |
//! | exactly one of `url` / `stdio` / `command` | `...backends.<name>` | `exactly one of "url", "stdio" or "command" is required` / `"url", "stdio" and "command" are mutually exclusive` |
//! | `url` and `replicas[i]` use `http` or `https` | `...url`, `...replicas[i]` | `unsupported URL scheme "ftp" (use http or https)` |
//! | `replicas`, `headers`, `transport = "sse"` only with `url` | that field | `only allowed for a "url" backend` |
//! | `replicas`, `headers`, `transport = "sse"` not with `stdio` either | that field | `only allowed for a "url" backend` |
//! | `args`, `env`, `cwd`, `stdio_policy` only with `command` (`env` also with `stdio`) | that field | `only allowed for a "command" backend` |
//! | `args`, `cwd`, `stdio_policy` not with `stdio` (the operator's entry fixes them) | that field | `set by the operator's stdio server entry; remove it` |
//! | `command`, `stdio` not empty (or blank) | `...command`, `...stdio` | `must not be empty` |
//!
//! What the operator lets a configuration run (catalog entries, `env` keys, free-form commands)
//! is checked by the gateway, which knows the operator's settings.
//! | `timeout_ms`, `deadline_ms`, `idle_timeout_s` positive | that field | `must be greater than 0` |
//! | header names / values valid HTTP | `...headers.passthrough[i]`, `...headers.add.<name>`, `...headers.remove[i]` | `invalid header name` / `invalid header value` |
//! | `aliases` keys and values, `allowed_tools` items, `env` keys not empty | that field | `must not be empty` |
//!
//! Overlapping backend names in one virtual host (`a` and `a-b`) are a warning
//! ([`ConfigWarning`]), not an error: a public name such as `a-b-x` could belong to either.

use std::fmt;

use http::{HeaderName, HeaderValue};

use crate::error::FieldError;
use crate::model::{BackendConfig, Transport, UserConfig, VirtualHostConfig};

/// Longest accepted virtual host id.
pub const MAX_VIRTUAL_HOST_ID_LEN: usize = 128;

/// Longest accepted backend name (it prefixes every public tool name, which clients often limit
/// to 64 or 128 characters).
pub const MAX_BACKEND_NAME_LEN: usize = 64;

/// Something in a configuration that works but deserves an operator's attention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    path: String,
    message: String,
}

impl ConfigWarning {
    /// Path of the concerned field (e.g. `virtual_hosts.vh1.backends`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the problem is.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Whether `id` is an acceptable virtual host id: 1–128 URL-unreserved characters
/// (`A-Z a-z 0-9 - _ . ~`), and not `.` or `..` (path segments with a meaning of their own).
///
/// ```
/// use mcp_config_store::is_valid_virtual_host_id;
/// assert!(is_valid_virtual_host_id("team-a.prod"));
/// assert!(!is_valid_virtual_host_id("team a"));
/// assert!(!is_valid_virtual_host_id(".."));
/// ```
pub fn is_valid_virtual_host_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_VIRTUAL_HOST_ID_LEN
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
}

/// Whether `name` is an acceptable backend name: 1–64 characters from `A-Z a-z 0-9 - _ .`,
/// starting with a letter or digit (the MCP tool-name character set, since it prefixes tool names).
///
/// ```
/// use mcp_config_store::is_valid_backend_name;
/// assert!(is_valid_backend_name("weather-eu"));
/// assert!(!is_valid_backend_name("-weather"));
/// assert!(!is_valid_backend_name("wea ther"));
/// ```
pub fn is_valid_backend_name(name: &str) -> bool {
    name.len() <= MAX_BACKEND_NAME_LEN
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `prefix.segment`, or `segment` alone at the root.
pub(crate) fn join(prefix: &str, segment: &str) -> String {
    match (prefix.is_empty(), segment.is_empty()) {
        (true, _) => segment.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) => format!("{prefix}.{segment}"),
    }
}

fn index(prefix: &str, i: usize) -> String {
    format!("{prefix}[{i}]")
}

pub(crate) fn user_config(cfg: &UserConfig, prefix: &str, errors: &mut Vec<FieldError>) {
    let hosts = join(prefix, "virtual_hosts");
    for (id, vh) in &cfg.virtual_hosts {
        let path = join(&hosts, id);
        if !is_valid_virtual_host_id(id) {
            errors.push(FieldError::new(
                &path,
                format!(
                    "invalid virtual host id: use 1-{MAX_VIRTUAL_HOST_ID_LEN} characters from A-Z a-z 0-9 - _ . ~ (not \".\" or \"..\")"
                ),
            ));
        }
        virtual_host(vh, &path, errors);
    }
}

fn virtual_host(vh: &VirtualHostConfig, prefix: &str, errors: &mut Vec<FieldError>) {
    let backends = join(prefix, "backends");
    for (name, b) in &vh.backends {
        let path = join(&backends, name);
        if !is_valid_backend_name(name) {
            errors.push(FieldError::new(
                &path,
                format!(
                    "invalid backend name: use 1-{MAX_BACKEND_NAME_LEN} characters from A-Z a-z 0-9 - _ . starting with a letter or digit"
                ),
            ));
        }
        backend(b, &path, errors);
    }
}

fn backend(b: &BackendConfig, path: &str, errors: &mut Vec<FieldError>) {
    let field = |name: &str| join(path, name);
    let kinds = [b.url.is_some(), b.stdio.is_some(), b.command.is_some()];
    match kinds.iter().filter(|set| **set).count() {
        0 => errors.push(FieldError::new(
            path,
            "exactly one of \"url\", \"stdio\" or \"command\" is required",
        )),
        1 => {}
        _ => errors.push(FieldError::new(
            path,
            "\"url\", \"stdio\" and \"command\" are mutually exclusive",
        )),
    }
    if let Some(url) = &b.url {
        check_scheme(url, &field("url"), errors);
    }
    for (i, url) in b.replicas.iter().enumerate() {
        check_scheme(url, &index(&field("replicas"), i), errors);
    }
    for (name, value) in [("command", &b.command), ("stdio", &b.stdio)] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            errors.push(FieldError::new(field(name), "must not be empty"));
        }
    }

    // Keys that only make sense for one kind of backend: reject them on the other kind so a
    // half-converted entry is noticed instead of silently ignored.
    let only_url = "only allowed for a \"url\" backend";
    let only_command = "only allowed for a \"command\" backend";
    if b.url.is_none() && (b.command.is_some() || b.stdio.is_some()) {
        if !b.replicas.is_empty() {
            errors.push(FieldError::new(field("replicas"), only_url));
        }
        if !b.headers.is_empty() {
            errors.push(FieldError::new(field("headers"), only_url));
        }
        if b.transport == Transport::Sse {
            errors.push(FieldError::new(field("transport"), only_url));
        }
    }
    if b.stdio.is_some() && b.command.is_none() {
        // The operator's catalog entry fixes how the program runs.
        let fixed = "set by the operator's stdio server entry; remove it";
        if !b.args.is_empty() {
            errors.push(FieldError::new(field("args"), fixed));
        }
        if b.cwd.is_some() {
            errors.push(FieldError::new(field("cwd"), fixed));
        }
        if b.stdio_policy.is_some() {
            errors.push(FieldError::new(field("stdio_policy"), fixed));
        }
    }
    if b.command.is_none() && b.stdio.is_none() && b.url.is_some() {
        if !b.args.is_empty() {
            errors.push(FieldError::new(field("args"), only_command));
        }
        if !b.env.is_empty() {
            errors.push(FieldError::new(field("env"), only_command));
        }
        if b.cwd.is_some() {
            errors.push(FieldError::new(field("cwd"), only_command));
        }
        if b.stdio_policy.is_some() {
            errors.push(FieldError::new(field("stdio_policy"), only_command));
        }
    }

    if b.timeout_ms == 0 {
        errors.push(FieldError::new(
            field("timeout_ms"),
            "must be greater than 0",
        ));
    }
    if b.deadline_ms == Some(0) {
        errors.push(FieldError::new(
            field("deadline_ms"),
            "must be greater than 0",
        ));
    }
    if b.idle_timeout_s == Some(0) {
        errors.push(FieldError::new(
            field("idle_timeout_s"),
            "must be greater than 0",
        ));
    }

    let headers = field("headers");
    for (i, name) in b.headers.passthrough.iter().enumerate() {
        check_header_name(name, &index(&join(&headers, "passthrough"), i), errors);
    }
    for (i, name) in b.headers.remove.iter().enumerate() {
        check_header_name(name, &index(&join(&headers, "remove"), i), errors);
    }
    let add = join(&headers, "add");
    for (name, value) in &b.headers.add {
        let path = join(&add, name);
        check_header_name(name, &path, errors);
        if HeaderValue::from_str(value).is_err() {
            // The value is not echoed: added headers typically carry credentials.
            errors.push(FieldError::new(path, "invalid header value"));
        }
    }

    let aliases = field("aliases");
    for (public, upstream) in &b.aliases {
        if public.is_empty() {
            errors.push(FieldError::new(&aliases, "an alias name must not be empty"));
        } else if upstream.is_empty() {
            errors.push(FieldError::new(join(&aliases, public), "must not be empty"));
        }
    }
    if let Some(tools) = &b.allowed_tools {
        for (i, tool) in tools.iter().enumerate() {
            if tool.is_empty() {
                errors.push(FieldError::new(
                    index(&field("allowed_tools"), i),
                    "must not be empty",
                ));
            }
        }
    }
    if b.env.keys().any(|k| k.is_empty() || k.contains('=')) {
        errors.push(FieldError::new(
            field("env"),
            "variable names must not be empty or contain \"=\"",
        ));
    }
}

fn check_scheme(url: &url::Url, path: &str, errors: &mut Vec<FieldError>) {
    if !matches!(url.scheme(), "http" | "https") {
        errors.push(FieldError::new(
            path,
            format!(
                "unsupported URL scheme {:?} (use http or https)",
                url.scheme()
            ),
        ));
    }
}

fn check_header_name(name: &str, path: &str, errors: &mut Vec<FieldError>) {
    if HeaderName::from_bytes(name.as_bytes()).is_err() {
        errors.push(FieldError::new(
            path,
            format!("invalid header name {name:?}"),
        ));
    }
}

pub(crate) fn user_config_warnings(cfg: &UserConfig, prefix: &str, out: &mut Vec<ConfigWarning>) {
    let hosts = join(prefix, "virtual_hosts");
    for (id, vh) in &cfg.virtual_hosts {
        let path = join(&join(&hosts, id), "backends");
        // Names are sorted (BTreeMap), but `a-b` need not directly follow `a` (`a-a`, `a.b` sort
        // between), so compare every pair; virtual hosts have few backends.
        for short in vh.backends.keys() {
            for long in vh.backends.keys() {
                if long.len() > short.len()
                    && long.starts_with(short.as_str())
                    && long.as_bytes().get(short.len()) == Some(&b'-')
                {
                    out.push(ConfigWarning {
                        path: path.clone(),
                        message: format!(
                            "backend names {short:?} and {long:?} overlap: a public name starting with \"{long}-\" could belong to either"
                        ),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::UserConfig;

    /// Every validation message for a single backend body in virtual host `vh1`, backend `w`.
    fn errors(body: &str) -> Vec<String> {
        let json = format!(r#"{{"virtual_hosts":{{"vh1":{{"backends":{{"w":{body}}}}}}}}}"#);
        UserConfig::from_json_str(&json)
            .unwrap_err()
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const P: &str = "virtual_hosts.vh1.backends.w";

    #[test]
    fn exactly_one_of_url_or_command() {
        assert_eq!(
            errors("{}"),
            [format!(
                r#"{P}: exactly one of "url", "stdio" or "command" is required"#
            )]
        );
        assert_eq!(
            errors(r#"{"url":"http://a/","command":"x"}"#),
            [format!(
                r#"{P}: "url", "stdio" and "command" are mutually exclusive"#
            )]
        );
    }

    #[test]
    fn urls_must_be_http() {
        assert_eq!(
            errors(r#"{"url":"ftp://a/","replicas":["http://b/","file:///c"]}"#),
            [
                format!(r#"{P}.url: unsupported URL scheme "ftp" (use http or https)"#),
                format!(r#"{P}.replicas[1]: unsupported URL scheme "file" (use http or https)"#),
            ]
        );
    }

    #[test]
    fn keys_of_the_other_backend_kind_are_rejected() {
        assert_eq!(
            errors(
                r#"{"command":"x","replicas":["http://b/"],"headers":{"remove":["cookie"]},"transport":"sse"}"#
            ),
            [
                format!(r#"{P}.replicas: only allowed for a "url" backend"#),
                format!(r#"{P}.headers: only allowed for a "url" backend"#),
                format!(r#"{P}.transport: only allowed for a "url" backend"#),
            ]
        );
        assert_eq!(
            errors(
                r#"{"url":"http://a/","args":["-v"],"env":{"A":"1"},"cwd":"/tmp","stdio_policy":"per_principal"}"#
            ),
            [
                format!(r#"{P}.args: only allowed for a "command" backend"#),
                format!(r#"{P}.env: only allowed for a "command" backend"#),
                format!(r#"{P}.cwd: only allowed for a "command" backend"#),
                format!(r#"{P}.stdio_policy: only allowed for a "command" backend"#),
            ]
        );
    }

    #[test]
    fn a_catalog_backend_takes_only_env_from_the_user() {
        assert_eq!(
            errors(
                r#"{"stdio":"memory","args":["-e"],"cwd":"/tmp","stdio_policy":"shared","headers":{"remove":["x"]}}"#
            ),
            [
                format!(r#"{P}.headers: only allowed for a "url" backend"#),
                format!("{P}.args: set by the operator's stdio server entry; remove it"),
                format!("{P}.cwd: set by the operator's stdio server entry; remove it"),
                format!("{P}.stdio_policy: set by the operator's stdio server entry; remove it"),
            ]
        );
        assert_eq!(
            errors(r#"{"stdio":" ","command":"x"}"#),
            [
                format!(r#"{P}: "url", "stdio" and "command" are mutually exclusive"#),
                format!("{P}.stdio: must not be empty"),
            ]
        );
        let ok = UserConfig::from_json_str(
            r#"{"virtual_hosts":{"v":{"backends":{"m":{"stdio":"memory","env":{"API_KEY":"k"}}}}}}"#,
        )
        .unwrap();
        assert_eq!(
            ok.virtual_hosts["v"].backends["m"].stdio.as_deref(),
            Some("memory")
        );
    }

    #[test]
    fn numbers_and_strings() {
        assert_eq!(
            errors(r#"{"command":"  ","timeout_ms":0,"deadline_ms":0,"idle_timeout_s":0}"#),
            [
                format!("{P}.command: must not be empty"),
                format!("{P}.timeout_ms: must be greater than 0"),
                format!("{P}.deadline_ms: must be greater than 0"),
                format!("{P}.idle_timeout_s: must be greater than 0"),
            ]
        );
        assert_eq!(
            errors(r#"{"command":"x","allowed_tools":["a",""],"aliases":{"p":""},"env":{"":"v"}}"#),
            [
                format!("{P}.aliases.p: must not be empty"),
                format!("{P}.allowed_tools[1]: must not be empty"),
                format!(r#"{P}.env: variable names must not be empty or contain "=""#),
            ]
        );
        assert_eq!(
            errors(r#"{"command":"x","aliases":{"":"u"}}"#),
            [format!("{P}.aliases: an alias name must not be empty")]
        );
    }

    #[test]
    fn header_names_and_values() {
        assert_eq!(
            errors(
                r#"{"url":"http://a/","headers":{"passthrough":["ok","bad name"],"add":{"x-k":"line\nbreak","bad:":"v"},"remove":["(x)"]}}"#
            ),
            [
                format!(r#"{P}.headers.passthrough[1]: invalid header name "bad name""#),
                format!(r#"{P}.headers.remove[0]: invalid header name "(x)""#),
                format!(r#"{P}.headers.add.bad:: invalid header name "bad:""#),
                format!("{P}.headers.add.x-k: invalid header value"),
            ]
        );
    }

    #[test]
    fn names_charset() {
        let e = UserConfig::from_json_str(
            r#"{"virtual_hosts":{"bad host":{"backends":{"-b":{"url":"http://a/"}}}, "..":{"backends":{}}}}"#,
        )
        .unwrap_err();
        let messages: Vec<String> = e.errors().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                r#"virtual_hosts...: invalid virtual host id: use 1-128 characters from A-Z a-z 0-9 - _ . ~ (not "." or "..")"#
                    .to_owned(),
                r#"virtual_hosts.bad host: invalid virtual host id: use 1-128 characters from A-Z a-z 0-9 - _ . ~ (not "." or "..")"#
                    .to_owned(),
                "virtual_hosts.bad host.backends.-b: invalid backend name: use 1-64 characters from A-Z a-z 0-9 - _ . starting with a letter or digit"
                    .to_owned(),
            ]
        );
        assert!(super::is_valid_backend_name(&"b".repeat(64)));
        assert!(!super::is_valid_backend_name(&"b".repeat(65)));
        assert!(super::is_valid_virtual_host_id(&"v".repeat(128)));
        assert!(!super::is_valid_virtual_host_id(&"v".repeat(129)));
        assert!(!super::is_valid_virtual_host_id(""));
    }

    #[test]
    fn all_errors_are_reported_at_once() {
        let e = UserConfig::from_json_str(
            r#"{"virtual_hosts":{"v":{"backends":{"a":{},"b":{"url":"ftp://x/"}}}}}"#,
        )
        .unwrap_err();
        assert_eq!(e.errors().len(), 2);
        assert_eq!(
            e.to_string(),
            r#"virtual_hosts.v.backends.a: exactly one of "url", "stdio" or "command" is required; virtual_hosts.v.backends.b.url: unsupported URL scheme "ftp" (use http or https)"#
        );
    }
}
