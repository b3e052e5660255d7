//! The plugin document: `version = 1` and a `plugins` list, parsed from TOML or JSON with strict
//! validation; [`ConfigError`] names the path of the problem.
//!
//! ```toml
//! version = 1
//!
//! [[plugins]]
//! name = "no-deletes"              # unique; used in logs and error messages
//! kind = "tool_filter"             # a kind registered in the Registry
//! hooks = ["tool_pre_invoke"]      # optional: default every hook the kind supports
//! mode = "enforce"                 # enforce (default) | permissive | disabled
//! priority = 10                    # optional, default 0: lower runs first, ties in document order
//! conditions = { virtual_hosts = ["team-*"], backends = ["notes"] }   # optional
//! config = { deny = ["delete_*"] } # per-kind settings, validated by the kind
//! ```

use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::{Conditions, Hook};

/// The only document version this build reads.
pub const DOCUMENT_VERSION: u64 = 1;

/// A problem with a plugin document: where (`origin`, then the dotted `path` of the field) and
/// what. Displayed as `origin: path: message`, leaving out empty parts.
///
/// ```
/// use mcp_plugins::{Document, Format};
///
/// let err = Document::parse("version = 2\nplugins = []", Format::Toml).unwrap_err();
/// assert_eq!(err.to_string(), "version: unsupported version 2 (this build reads version 1)");
/// let err = err.with_source("plugins.toml");
/// assert_eq!(err.path, "version");
/// assert!(err.to_string().starts_with("plugins.toml: version: "));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
#[non_exhaustive]
pub struct ConfigError {
    /// The file, Redis key or other origin of the document (empty when unknown).
    pub origin: String,
    /// Dotted path of the offending field, e.g. `plugins[1].config.limit` (empty: the document).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            origin: String::new(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// Names the origin of the document.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.origin = source.into();
        self
    }

    fn render(&self) -> String {
        [
            self.origin.as_str(),
            self.path.as_str(),
            self.message.as_str(),
        ]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(": ")
    }
}

/// The syntax of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// TOML (the gateway's configuration language).
    Toml,
    /// JSON.
    Json,
}

impl Format {
    /// `.json` is JSON, anything else TOML.
    pub fn from_path(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Toml,
        }
    }

    /// JSON when the text starts with `{` (after white space), else TOML (for Redis values).
    pub fn sniff(text: &str) -> Self {
        if text.trim_start().starts_with('{') {
            Format::Json
        } else {
            Format::Toml
        }
    }
}

/// What a document entry's mode does with the plugin's answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// Denials deny; plugin errors deny with an internal error; rewrites apply; lists are filtered.
    #[default]
    Enforce,
    /// Denials and plugin errors are logged and the call proceeds; rewrites apply; lists are not
    /// filtered. For trying a policy out.
    Permissive,
    /// Validated, then left out of the chain.
    Disabled,
}

/// One entry of the `plugins` list, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PluginEntry {
    /// Unique name.
    pub name: String,
    /// Registered kind.
    pub kind: String,
    /// Hooks to run at (default: every hook the kind supports).
    #[serde(default, deserialize_with = "de_hooks")]
    pub hooks: Option<Vec<Hook>>,
    /// Mode.
    #[serde(default)]
    pub mode: Mode,
    /// Lower runs first.
    #[serde(default)]
    pub priority: i32,
    /// Which calls the entry applies to.
    #[serde(default)]
    pub conditions: Conditions,
    /// Per-kind settings.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
}

fn de_hooks<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<Vec<Hook>>, D::Error> {
    let names = Option::<Vec<String>>::deserialize(de)?;
    names
        .map(|names| {
            names
                .iter()
                .map(|n| n.parse::<Hook>().map_err(serde::de::Error::custom))
                .collect()
        })
        .transpose()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    version: Option<u64>,
    plugins: Option<Vec<PluginEntry>>,
}

/// A parsed, structurally valid plugin document (kinds and per-plugin settings are checked when a
/// [`Registry`](crate::Registry) builds it).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Document {
    /// The entries, in document order.
    pub plugins: Vec<PluginEntry>,
}

impl Document {
    /// Parses and checks the structure: known keys only, `version` 1, a `plugins` list, unique
    /// non-empty names.
    pub fn parse(text: &str, format: Format) -> Result<Self, ConfigError> {
        let wire: Wire = match format {
            Format::Json => json(text)?,
            Format::Toml => toml(text)?,
        };
        match wire.version {
            None => {
                return Err(ConfigError::new(
                    "version",
                    format!("missing (this build reads version {DOCUMENT_VERSION})"),
                ));
            }
            Some(DOCUMENT_VERSION) => {}
            Some(other) => {
                return Err(ConfigError::new(
                    "version",
                    format!(
                        "unsupported version {other} (this build reads version {DOCUMENT_VERSION})"
                    ),
                ));
            }
        }
        let plugins = wire
            .plugins
            .ok_or_else(|| ConfigError::new("plugins", "missing plugin section"))?;
        for (i, entry) in plugins.iter().enumerate() {
            if entry.name.trim().is_empty() {
                return Err(ConfigError::new(format!("plugins[{i}].name"), "empty name"));
            }
            if plugins[..i].iter().any(|e| e.name == entry.name) {
                return Err(ConfigError::new(
                    format!("plugins[{i}].name"),
                    format!("duplicate plugin name `{}`", entry.name),
                ));
            }
        }
        Ok(Self { plugins })
    }
}

/// The settings of one entry, handed to its kind's factory.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct PluginConfig<'a> {
    /// The entry's name.
    pub name: &'a str,
    /// The entry's kind.
    pub kind: &'a str,
    /// The entry's `config` table, when present.
    pub value: Option<&'a serde_json::Value>,
    pub(crate) index: usize,
}

impl<'a> PluginConfig<'a> {
    /// Settings for tests and direct construction (`name` doubles as the kind).
    pub fn new(name: &'a str, value: Option<&'a serde_json::Value>) -> Self {
        Self {
            name,
            kind: name,
            value,
            index: 0,
        }
    }

    /// Deserialises the `config` table (an absent one reads as `{}`); errors carry the path
    /// below `plugins[i].config`. Use `#[serde(deny_unknown_fields)]` on `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let empty = serde_json::Value::Object(serde_json::Map::new());
        let value = self.value.unwrap_or(&empty);
        serde_path_to_error::deserialize(value).map_err(|e| {
            let inner = path_string(e.path());
            self.error_at(&inner, e.inner().to_string())
        })
    }

    /// An error about the `config` table as a whole.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        self.error_at("", message)
    }

    /// An error about `config.<path>`.
    pub fn error_at(&self, path: &str, message: impl Into<String>) -> ConfigError {
        let base = format!("plugins[{}].config", self.index);
        let path = if path.is_empty() {
            base
        } else if path.starts_with('[') {
            format!("{base}{path}")
        } else {
            format!("{base}.{path}")
        };
        ConfigError::new(path, message)
    }
}

/// `serde_path_to_error` prints the root as `.`; we report it as an empty path.
fn path_string(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." { String::new() } else { s }
}

fn json<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = path_string(e.path());
        let inner = e.into_inner();
        let message = match inner.classify() {
            serde_json::error::Category::Data => {
                let full = inner.to_string();
                let suffix = format!(" at line {} column {}", inner.line(), inner.column());
                full.strip_suffix(&suffix).unwrap_or(&full).to_owned()
            }
            _ => inner.to_string(),
        };
        ConfigError::new(path, message)
    })?;
    de.end().map_err(|e| ConfigError::new("", e.to_string()))?;
    Ok(value)
}

fn toml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = ::toml::Deserializer::parse(text)
        .map_err(|e| ConfigError::new("", toml_message(&e, text)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = path_string(e.path());
        let inner = e.into_inner();
        let message = if path.is_empty() {
            toml_message(&inner, text)
        } else {
            inner.message().trim_end().to_owned()
        };
        ConfigError::new(path, message)
    })
}

/// The message with its line and column (the only locator of a syntax error).
fn toml_message(err: &::toml::de::Error, text: &str) -> String {
    let message = err.message().trim_end();
    match err.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("{message} at line {line} column {column}")
        }
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str, format: Format) -> String {
        Document::parse(text, format)
            .expect_err("invalid document")
            .to_string()
    }

    #[test]
    fn structure_errors_name_the_path() {
        assert_eq!(
            err("plugins = []", Format::Toml),
            "version: missing (this build reads version 1)"
        );
        assert_eq!(
            err("version = 1", Format::Toml),
            "plugins: missing plugin section"
        );
        assert_eq!(
            err(r#"{"version":3,"plugins":[]}"#, Format::Json),
            "version: unsupported version 3 (this build reads version 1)"
        );
        let unknown = err("version = 1\nplugins = []\nextra = true", Format::Toml);
        assert!(unknown.contains("unknown field `extra`"), "{unknown}");
        let entry_key = err(
            "version = 1\n[[plugins]]\nname = \"a\"\nkind = \"k\"\nsurprise = 1",
            Format::Toml,
        );
        assert!(entry_key.starts_with("plugins[0]"), "{entry_key}");
        assert!(
            entry_key.contains("unknown field `surprise`"),
            "{entry_key}"
        );
        let mode = err(
            r#"{"version":1,"plugins":[{"name":"a","kind":"k","mode":"loud"}]}"#,
            Format::Json,
        );
        assert!(
            mode.starts_with("plugins[0].mode: unknown variant `loud`"),
            "{mode}"
        );
        let hook = err(
            r#"{"version":1,"plugins":[{"name":"a","kind":"k","hooks":["tool_pre_invoke","nope"]}]}"#,
            Format::Json,
        );
        assert!(
            hook.starts_with("plugins[0].hooks: unknown hook `nope`"),
            "{hook}"
        );
        let cond = err(
            r#"{"version":1,"plugins":[{"name":"a","kind":"k","conditions":{"tool":["x"]}}]}"#,
            Format::Json,
        );
        assert!(
            cond.starts_with("plugins[0].conditions.tool: unknown field `tool`"),
            "{cond}"
        );
        assert_eq!(
            err(
                r#"{"version":1,"plugins":[{"name":"a","kind":"k"},{"name":"a","kind":"k"}]}"#,
                Format::Json
            ),
            "plugins[1].name: duplicate plugin name `a`"
        );
        let syntax = err("version = = 1", Format::Toml);
        assert!(syntax.contains("line 1"), "{syntax}");
    }

    #[test]
    fn sniffs_json_and_reads_defaults() {
        assert_eq!(Format::sniff("  {\"version\":1}"), Format::Json);
        assert_eq!(Format::sniff("version = 1"), Format::Toml);
        let doc = Document::parse(
            "version = 1\n[[plugins]]\nname = \"a\"\nkind = \"k\"\nconfig = { x = 1 }",
            Format::Toml,
        )
        .expect("valid");
        let entry = &doc.plugins[0];
        assert_eq!(
            (entry.mode, entry.priority, entry.hooks.is_none()),
            (Mode::Enforce, 0, true)
        );
        assert_eq!(entry.config, Some(serde_json::json!({"x": 1})));
    }
}
