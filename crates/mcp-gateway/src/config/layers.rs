//! [`EffectiveConfig`]: defaults, then a TOML file, then environment variables, then command-line
//! overrides, each value remembering where it came from; printable with secrets redacted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::error::{ConfigError, Problems, Source};
use super::keys::{self, DefaultValue, ENV_PREFIX, KEYS, KeySpec, Support, ValueKind};
use super::stdio_servers::{self, Catalog};

/// A configuration value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Value {
    /// A string.
    Str(String),
    /// A non-negative integer.
    Int(i64),
    /// A bool.
    Bool(bool),
    /// A list of strings.
    List(Vec<String>),
}

impl Value {
    fn from_default(default: DefaultValue) -> Option<Self> {
        match default {
            DefaultValue::Unset => None,
            DefaultValue::Str(s) => Some(Self::Str(s.to_owned())),
            DefaultValue::Int(i) => Some(Self::Int(i)),
            DefaultValue::Bool(b) => Some(Self::Bool(b)),
            DefaultValue::List(items) => {
                Some(Self::List(items.iter().map(|s| (*s).to_owned()).collect()))
            }
        }
    }

    /// The value as TOML text (strings quoted and escaped).
    pub fn to_toml(&self) -> String {
        match self {
            Self::Str(s) => toml::Value::String(s.clone()).to_string(),
            Self::Int(i) => i.to_string(),
            Self::Bool(b) => b.to_string(),
            Self::List(items) => {
                let quoted: Vec<String> = items
                    .iter()
                    .map(|s| toml::Value::String(s.clone()).to_string())
                    .collect();
                format!("[{}]", quoted.join(", "))
            }
        }
    }
}

/// One set value and its origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    pub(crate) source: Source,
}

/// A command-line override of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Override {
    /// The key, e.g. `listen.addr`.
    pub key: String,
    /// The value, written as in an environment variable (lists comma-separated).
    pub value: String,
    /// How the flag was written, for error messages (e.g. `--listen`).
    pub flag: String,
}

impl Override {
    /// An override of `key` given as `flag`.
    pub fn new(key: impl Into<String>, value: impl Into<String>, flag: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            flag: flag.into(),
        }
    }

    /// Parses `key=value` (the argument of `--set`).
    ///
    /// # Errors
    ///
    /// When there is no `=`.
    pub fn parse_assignment(text: &str) -> Result<Self, InvalidAssignment> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| InvalidAssignment(text.to_owned()))?;
        let key = key.trim();
        Ok(Self::new(key, value, format!("--set {key}")))
    }
}

/// Why [`Override::parse_assignment`] rejected its argument: it has no `=`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected KEY=VALUE, found `{0}`")]
pub struct InvalidAssignment(String);

/// The merged configuration: every set key with its value and origin, before semantic checks.
///
/// Precedence, lowest first: defaults, the file, `MCP_GATEWAY_*` environment variables, command-line
/// overrides. Build the typed [`GatewayConfig`](super::GatewayConfig) with
/// [`build`](Self::build); print it with [`to_toml`](Self::to_toml).
///
/// ```
/// use mcp_gateway::config::{EffectiveConfig, Override};
///
/// let env = [("MCP_GATEWAY_LISTEN_ADDR".to_owned(), "127.0.0.1:0".to_owned())];
/// let cli = [Override::new("telemetry.log_level", "debug", "--log-level")];
/// let effective = EffectiveConfig::from_sources(None, env, &cli).unwrap();
/// let config = effective.build().unwrap();
/// assert_eq!(config.listen.addr.port(), 0);
/// assert_eq!(config.telemetry.log_level, "debug");
/// assert!(effective.to_toml().contains("addr = \"127.0.0.1:0\""));
/// ```
#[derive(Clone, Debug)]
pub struct EffectiveConfig {
    pub(crate) values: BTreeMap<&'static str, Entry>,
    /// `[stdio_servers.NAME]` tables (file only: the catalog has no environment overrides).
    pub(crate) stdio_servers: Catalog,
    pub(crate) file: Option<PathBuf>,
    warnings: Vec<String>,
}

impl EffectiveConfig {
    /// Only the defaults.
    pub fn defaults() -> Self {
        let values = KEYS
            .iter()
            .filter(|spec| spec.support == Support::Supported)
            .filter_map(|spec| {
                Value::from_default(spec.default).map(|value| {
                    (
                        spec.key,
                        Entry {
                            value,
                            source: Source::Default,
                        },
                    )
                })
            })
            .collect();
        Self {
            values,
            stdio_servers: Catalog::default(),
            file: None,
            warnings: Vec::new(),
        }
    }

    /// Defaults, then `file` (if any), then the `MCP_GATEWAY_*` variables among `env`, then
    /// `overrides`.
    ///
    /// # Errors
    ///
    /// Every problem found: unreadable file, TOML syntax, unknown keys or sections, values of the
    /// wrong type, unsupported features; each names its source and key.
    pub fn from_sources(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &[Override],
    ) -> Result<Self, ConfigError> {
        let mut config = Self::defaults();
        let mut problems = Problems::default();
        if let Some(path) = file {
            let source = Source::File(path.to_path_buf());
            match std::fs::read_to_string(path) {
                Ok(text) => config.merge_toml(&text, &source, &mut problems),
                Err(e) => problems.push(&source, "", format!("cannot read the file: {e}")),
            }
            config.file = Some(path.to_path_buf());
        }
        config.merge_env(env, &mut problems);
        for o in overrides {
            config.merge_override(o, &mut problems);
        }
        problems.into_result()?;
        Ok(config)
    }

    /// Defaults, then the TOML document `text` (reported as coming from `name`).
    ///
    /// # Errors
    ///
    /// As [`from_sources`](Self::from_sources).
    pub fn from_toml_str(text: &str, name: &str) -> Result<Self, ConfigError> {
        let mut config = Self::defaults();
        let mut problems = Problems::default();
        config.merge_toml(text, &Source::File(PathBuf::from(name)), &mut problems);
        problems.into_result()?;
        Ok(config)
    }

    /// The configuration file, when one was read.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Non-fatal findings (e.g. an `MCP_GATEWAY_*` variable that names no key), to be logged.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The value of `key` and where it came from, if set.
    pub fn get(&self, key: &str) -> Option<(&Value, &Source)> {
        self.values.get(key).map(|e| (&e.value, &e.source))
    }

    fn set(&mut self, spec: &'static KeySpec, value: Value, source: &Source) {
        self.values.insert(
            spec.key,
            Entry {
                value,
                source: source.clone(),
            },
        );
    }

    fn merge_toml(&mut self, text: &str, source: &Source, problems: &mut Problems) {
        let table: toml::Table = match text.parse() {
            Ok(table) => table,
            Err(e) => {
                let place = e
                    .span()
                    .map(|span| {
                        let (line, column) = line_column(text, span.start);
                        format!(" at line {line}, column {column}")
                    })
                    .unwrap_or_default();
                problems.push(
                    source,
                    "",
                    format!("TOML syntax error{place}: {}", e.message().trim()),
                );
                return;
            }
        };
        self.merge_table(&table, "", source, problems);
    }

    fn merge_table(
        &mut self,
        table: &toml::Table,
        prefix: &str,
        source: &Source,
        problems: &mut Problems,
    ) {
        let sections = keys::sections();
        for (name, value) in table {
            let full = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            if full == stdio_servers::SECTION {
                self.stdio_servers.merge(value, source, problems);
            } else if let Some(spec) = keys::find(&full) {
                if let Support::NotInThisBuild(feature) = spec.support {
                    problems.push(source, &full, not_in_build(feature));
                    continue;
                }
                match from_toml(spec.kind, value) {
                    Ok(v) => self.set(spec, v, source),
                    Err(found) => problems.push(
                        source,
                        &full,
                        format!("expected {}, found {found}", expected(spec.kind)),
                    ),
                }
            } else if let toml::Value::Table(inner) = value {
                if !sections.contains(&full.as_str()) {
                    problems.push(source, &full, unknown_section(&sections));
                } else if let Some(feature) = unsupported_section(&full) {
                    problems.push(source, &full, not_in_build(feature));
                } else {
                    self.merge_table(inner, &full, source, problems);
                }
            } else if sections.contains(&full.as_str()) {
                problems.push(source, &full, "expected a table (a [section])");
            } else {
                problems.push(source, &full, unknown_key(&full));
            }
        }
    }

    fn merge_env(
        &mut self,
        env: impl IntoIterator<Item = (String, String)>,
        problems: &mut Problems,
    ) {
        let env: BTreeMap<String, String> = env
            .into_iter()
            .filter(|(name, _)| name.starts_with(ENV_PREFIX))
            .collect();
        for spec in KEYS {
            let name = spec.env_name();
            let Some(raw) = env.get(&name) else { continue };
            let source = Source::Env(name);
            self.merge_string(spec, raw, &source, problems);
        }
        // Variables that look like overrides but name no key: probably a typo. They are not
        // errors, because secrets and tools use the same prefix (MCP_GATEWAY_JWT_SECRET, ...).
        let referenced = self.referenced_env_names();
        for name in env.keys() {
            let is_key = KEYS.iter().any(|spec| spec.env_name() == *name);
            if !is_key && !referenced.contains(name) && !KNOWN_NON_KEY_ENV.contains(&name.as_str())
            {
                self.warnings.push(format!(
                    "environment variable {name} names no configuration key; ignored (see `mcp-gateway config-keys`)"
                ));
            }
        }
    }

    fn merge_override(&mut self, o: &Override, problems: &mut Problems) {
        let source = Source::Cli(o.flag.clone());
        match keys::find(&o.key) {
            Some(spec) => self.merge_string(spec, &o.value, &source, problems),
            None => problems.push(&source, &o.key, unknown_key(&o.key)),
        }
    }

    fn merge_string(
        &mut self,
        spec: &'static KeySpec,
        raw: &str,
        source: &Source,
        problems: &mut Problems,
    ) {
        if let Support::NotInThisBuild(feature) = spec.support {
            problems.push(source, spec.key, not_in_build(feature));
            return;
        }
        match from_string(spec.kind, raw) {
            Ok(v) => self.set(spec, v, source),
            Err(()) => problems.push(
                source,
                spec.key,
                format!("expected {}, found `{raw}`", expected(spec.kind)),
            ),
        }
    }

    /// Names of environment variables that configuration keys point at (`*_env` keys).
    fn referenced_env_names(&self) -> Vec<String> {
        self.values
            .iter()
            .filter(|(key, _)| key.ends_with("_env"))
            .filter_map(|(_, entry)| match &entry.value {
                Value::Str(name) if !name.is_empty() => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// The effective configuration as a TOML document, every key listed with its origin, unset
    /// keys and keys this build does not support as comments, passwords in URLs redacted.
    pub fn to_toml(&self) -> String {
        let mut out = String::from(
            "# mcp-gateway effective configuration (precedence: defaults < file < MCP_GATEWAY_* environment < command line)\n",
        );
        if let Some(file) = &self.file {
            let _ = writeln!(out, "# file: {}", file.display());
        }
        let mut current = None;
        for spec in KEYS {
            let section = spec.section();
            if current != Some(section) {
                current = Some(section);
                if let Some(feature) = unsupported_section(section) {
                    let _ = write!(out, "\n# [{section}]: not in this build ({feature})\n");
                } else if !section.is_empty() {
                    let _ = write!(out, "\n[{section}]\n");
                }
            }
            let leaf = spec.leaf();
            match (spec.support, self.values.get(spec.key)) {
                (Support::NotInThisBuild(feature), _) => {
                    let _ = writeln!(out, "# {leaf}: not in this build ({feature})");
                }
                (Support::Supported, None) => {
                    let _ = writeln!(out, "# {leaf} = (unset)");
                }
                (Support::Supported, Some(entry)) => {
                    let value = if spec.secret {
                        redact(&entry.value)
                    } else {
                        entry.value.clone()
                    };
                    let _ = writeln!(out, "{leaf} = {}  # {}", value.to_toml(), entry.source);
                }
            }
        }
        out.push_str(&self.stdio_servers.to_toml());
        out
    }
}

/// Environment variable names that share the prefix without naming a key.
const KNOWN_NON_KEY_ENV: &[&str] = &[
    "MCP_GATEWAY_CONFIG",
    "MCP_GATEWAY_JWT_SECRET",
    "MCP_GATEWAY_SEALING_SECRET",
    "MCP_GATEWAY_SESSION_KEYS",
    "MCP_GATEWAY_URL",
    "MCP_GATEWAY_TOKEN",
];

fn not_in_build(feature: &str) -> String {
    format!("{feature} is not in this build of mcp-gateway; remove this setting")
}

fn unsupported_section(section: &str) -> Option<&'static str> {
    let mut specs = KEYS
        .iter()
        .filter(|spec| spec.section() == section)
        .peekable();
    specs.peek()?;
    let mut feature = None;
    for spec in specs {
        match spec.support {
            Support::Supported => return None,
            Support::NotInThisBuild(f) => feature = Some(f),
        }
    }
    feature
}

fn unknown_section(sections: &[&str]) -> String {
    let top: Vec<&str> = sections
        .iter()
        .copied()
        .filter(|s| !s.contains('.'))
        .collect();
    format!(
        "unknown section (known: {}, {})",
        top.join(", "),
        stdio_servers::SECTION
    )
}

fn unknown_key(key: &str) -> String {
    let section = key.rsplit_once('.').map_or("", |(s, _)| s);
    let siblings: Vec<&str> = KEYS
        .iter()
        .filter(|spec| spec.section() == section)
        .map(|spec| spec.leaf())
        .collect();
    if siblings.is_empty() {
        "unknown key".to_owned()
    } else if section.is_empty() {
        format!("unknown key (top-level keys: {})", siblings.join(", "))
    } else {
        format!("unknown key (keys of [{section}]: {})", siblings.join(", "))
    }
}

fn expected(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::String => "a string",
        ValueKind::Integer => "a non-negative integer",
        ValueKind::Bool => "true or false",
        ValueKind::StringList => "a list of strings",
    }
}

fn from_toml(kind: ValueKind, value: &toml::Value) -> Result<Value, String> {
    match (kind, value) {
        (ValueKind::String, toml::Value::String(s)) => Ok(Value::Str(s.clone())),
        (ValueKind::Integer, toml::Value::Integer(i)) if *i >= 0 => Ok(Value::Int(*i)),
        (ValueKind::Bool, toml::Value::Boolean(b)) => Ok(Value::Bool(*b)),
        (ValueKind::StringList, toml::Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                toml::Value::String(s) => Ok(s.clone()),
                other => Err(format!("a list holding {}", describe(other))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Value::List),
        (_, other) => Err(describe(other)),
    }
}

fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("the string {}", toml::Value::String(s.clone())),
        toml::Value::Integer(i) => format!("the integer {i}"),
        toml::Value::Float(f) => format!("the float {f}"),
        toml::Value::Boolean(b) => format!("the bool {b}"),
        toml::Value::Datetime(d) => format!("the date-time {d}"),
        toml::Value::Array(_) => "a list".to_owned(),
        toml::Value::Table(_) => "a table".to_owned(),
    }
}

fn from_string(kind: ValueKind, raw: &str) -> Result<Value, ()> {
    match kind {
        ValueKind::String => Ok(Value::Str(raw.to_owned())),
        ValueKind::Integer => raw
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|i| *i >= 0)
            .map(Value::Int)
            .ok_or(()),
        ValueKind::Bool => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Value::Bool(true)),
            "false" | "0" | "no" | "off" => Ok(Value::Bool(false)),
            _ => Err(()),
        },
        ValueKind::StringList => Ok(Value::List(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )),
    }
}

/// Hides the password (and query) of a URL; a value that is not a URL is hidden whole.
fn redact(value: &Value) -> Value {
    let Value::Str(text) = value else {
        return value.clone();
    };
    match url::Url::parse(text) {
        Ok(mut url) => {
            if url.password().is_some() {
                let _ = url.set_password(Some("REDACTED"));
            }
            if url.query().is_some() {
                url.set_query(Some("REDACTED"));
            }
            Value::Str(url.to_string())
        }
        Err(_) if text.is_empty() => value.clone(),
        Err(_) => Value::Str("REDACTED".to_owned()),
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(result: Result<EffectiveConfig, ConfigError>) -> Vec<String> {
        result
            .expect_err("should fail")
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn file_then_env_then_cli() {
        let dir = std::env::temp_dir().join(format!("mcpgw-layers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("gw.toml");
        std::fs::write(
            &path,
            "[listen]\naddr = \"127.0.0.1:1\"\nadmin_addr = \"127.0.0.1:2\"\n[telemetry]\nlog_level = \"warn\"\n",
        )
        .expect("write");
        let env = vec![
            (
                "MCP_GATEWAY_LISTEN_ADDR".to_owned(),
                "127.0.0.1:3".to_owned(),
            ),
            (
                "MCP_GATEWAY_SECURITY_ALLOWED_ORIGINS".to_owned(),
                "http://a, http://b".to_owned(),
            ),
            ("UNRELATED".to_owned(), "x".to_owned()),
        ];
        let cli = [Override::new("telemetry.log_level", "debug", "--log-level")];
        let c = EffectiveConfig::from_sources(Some(&path), env, &cli).expect("valid");
        assert_eq!(
            c.get("listen.addr"),
            Some((
                &Value::Str("127.0.0.1:3".into()),
                &Source::Env("MCP_GATEWAY_LISTEN_ADDR".into())
            ))
        );
        assert_eq!(
            c.get("listen.admin_addr").map(|(_, s)| s.clone()),
            Some(Source::File(path.clone()))
        );
        assert_eq!(
            c.get("telemetry.log_level").map(|(v, _)| v.clone()),
            Some(Value::Str("debug".into()))
        );
        assert_eq!(
            c.get("security.allowed_origins").map(|(v, _)| v.clone()),
            Some(Value::List(vec!["http://a".into(), "http://b".into()]))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unknown_keys_sections_and_types_are_named() {
        let p = problems(EffectiveConfig::from_toml_str(
            "shutdown_drain = 1\n[listen]\nadr = \"x\"\n[nope]\na = 1\n[limits]\nmax_body_bytes = \"big\"\n",
            "gw.toml",
        ));
        let has = |prefix: &str| p.iter().any(|line| line.starts_with(prefix));
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(
            has(
                "gw.toml: shutdown_drain: unknown key (top-level keys: shutdown_drain_s, config_watch_ms)"
            ),
            "{p:?}"
        );
        assert!(
            has(
                "gw.toml: listen.adr: unknown key (keys of [listen]: addr, admin_addr, tls_cert, tls_key)"
            ),
            "{p:?}"
        );
        assert!(
            has("gw.toml: nope: unknown section (known: listen, limits, auth"),
            "{p:?}"
        );
        assert!(has(
            "gw.toml: limits.max_body_bytes: expected a non-negative integer, found the string \"big\""
        ));
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let p = problems(EffectiveConfig::from_toml_str(
            "[listen]\naddr = \n",
            "gw.toml",
        ));
        assert!(
            p[0].starts_with("gw.toml: TOML syntax error at line 2"),
            "{p:?}"
        );
    }

    #[test]
    fn env_values_are_typed_and_unknown_names_warned() {
        let p = problems(EffectiveConfig::from_sources(
            None,
            vec![(
                "MCP_GATEWAY_LIMITS_MAX_CONNECTIONS".to_owned(),
                "-1".to_owned(),
            )],
            &[],
        ));
        assert_eq!(
            p[0],
            "environment variable MCP_GATEWAY_LIMITS_MAX_CONNECTIONS: limits.max_connections: expected a non-negative integer, found `-1`"
        );
        let c = EffectiveConfig::from_sources(
            None,
            vec![
                ("MCP_GATEWAY_LISTN_ADDR".to_owned(), "x".to_owned()),
                ("MCP_GATEWAY_JWT_SECRET".to_owned(), "s".to_owned()),
                (
                    "MCP_GATEWAY_TELEMETRY_ACCESS_LOG".to_owned(),
                    "off".to_owned(),
                ),
            ],
            &[],
        )
        .expect("valid");
        assert_eq!(c.warnings().len(), 1, "{:?}", c.warnings());
        assert!(c.warnings()[0].contains("MCP_GATEWAY_LISTN_ADDR"));
        assert_eq!(
            c.get("telemetry.access_log").map(|(v, _)| v.clone()),
            Some(Value::Bool(false))
        );
    }

    #[test]
    fn print_redacts_passwords_and_lists_every_key() {
        let c = EffectiveConfig::from_toml_str(
            "[config_store]\nkind = \"redis\"\nurl = \"redis://user:hunter2@127.0.0.1:6379/0\"\n",
            "gw.toml",
        )
        .expect("valid");
        let text = c.to_toml();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("url = \"redis://user:REDACTED@127.0.0.1:6379/0\"  # gw.toml"));
        assert!(text.contains("# public_url = (unset)"));
        assert!(text.contains("[plugins]"), "{text}");
        assert!(text.contains("# config = (unset)"), "{text}");
        assert!(text.contains("consecutive_failures = 5  # default"));
        // The printed document is itself a valid configuration.
        let again = EffectiveConfig::from_toml_str(&text, "printed.toml").expect("round trip");
        assert_eq!(
            again.get("config_store.kind").map(|(v, _)| v.clone()),
            Some(Value::Str("redis".into()))
        );
    }
}
