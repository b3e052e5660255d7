//! The operator's stdio server catalog: `[stdio_servers.NAME]` tables of the configuration file.
//!
//! Unlike the flat keys of [`KEYS`](super::KEYS), the catalog is a set of named tables, so it is
//! read from the file only (no `MCP_GATEWAY_*` override), checked here, printed by
//! `--print-config` with `env` values redacted, and handed to the router as
//! [`mcp_router::StdioServer`]s.
//!
//! ```toml
//! [stdio_servers.memory]
//! command = "npx"                          # looked up on the gateway's own PATH
//! args = ["-y", "@modelcontextprotocol/server-memory"]
//! env = { MEMORY_FILE_PATH = "/var/lib/mcp/memory.json" }
//! cwd = "/var/lib/mcp"
//! policy = "per_principal"                 # the default; "shared": one process for everyone
//! idle_timeout_s = 300
//! user_env = ["API_KEY"]                   # env keys a user configuration may set
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use mcp_config_store::StdioPolicy;
use mcp_router::StdioServer;
use serde::Deserialize;

use super::error::{Problems, Source};

/// The top-level table name of the catalog.
pub(crate) const SECTION: &str = "stdio_servers";

/// One `[stdio_servers.NAME]` table as written.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    policy: StdioPolicy,
    #[serde(default)]
    idle_timeout_s: Option<u64>,
    #[serde(default)]
    user_env: Vec<String>,
}

/// The catalog read from a file, with where it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Catalog {
    entries: BTreeMap<String, Entry>,
    source: Option<Source>,
}

impl Catalog {
    /// Reads the `[stdio_servers]` table of a file, reporting every bad entry with its path.
    pub(crate) fn merge(&mut self, value: &toml::Value, source: &Source, problems: &mut Problems) {
        let Some(table) = value.as_table() else {
            problems.push(
                source,
                SECTION,
                "expected a table of [stdio_servers.NAME] tables",
            );
            return;
        };
        self.source = Some(source.clone());
        for (name, value) in table {
            let key = format!("{SECTION}.{name}");
            if !mcp_config_store::is_valid_backend_name(name) {
                problems.push(
                    source,
                    &key,
                    "invalid stdio server name: use 1-64 characters from A-Z a-z 0-9 - _ . starting with a letter or digit",
                );
                continue;
            }
            match Entry::deserialize(value.clone()) {
                Ok(entry) => {
                    for (field, message) in entry.problems() {
                        problems.push(source, &format!("{key}.{field}"), message);
                    }
                    self.entries.insert(name.clone(), entry);
                }
                Err(e) => problems.push(source, &key, e.message().trim().to_owned()),
            }
        }
    }

    /// The entries as the router takes them.
    pub(crate) fn servers(&self) -> BTreeMap<String, StdioServer> {
        self.entries
            .iter()
            .map(|(name, e)| {
                let server = StdioServer {
                    command: e.command.clone(),
                    args: e.args.clone(),
                    env: e.env.clone(),
                    cwd: e.cwd.clone(),
                    policy: e.policy,
                    idle_timeout: e.idle_timeout_s.map(Duration::from_secs),
                    user_env: e.user_env.clone(),
                };
                (name.clone(), server)
            })
            .collect()
    }

    /// The catalog as TOML tables for `--print-config`; `env` values are redacted (they often
    /// hold credentials).
    pub(crate) fn to_toml(&self) -> String {
        let mut out = String::new();
        let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let list = |items: &[String]| {
            let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
            format!("[{}]", quoted.join(", "))
        };
        let origin = self
            .source
            .as_ref()
            .map_or_else(String::new, |s| format!("  # {s}"));
        for (name, e) in &self.entries {
            let _ = writeln!(out, "\n[{SECTION}.{}]{origin}", quote_key(name));
            let _ = writeln!(out, "command = {}", quote(&e.command));
            let _ = writeln!(out, "args = {}", list(&e.args));
            let env: Vec<String> = e
                .env
                .keys()
                .map(|k| format!("{} = \"REDACTED\"", quote_key(k)))
                .collect();
            let _ = writeln!(out, "env = {{ {} }}", env.join(", "));
            if let Some(cwd) = &e.cwd {
                let _ = writeln!(out, "cwd = {}", quote(&cwd.to_string_lossy()));
            }
            let _ = writeln!(out, "policy = {}", quote(e.policy.as_str()));
            if let Some(idle) = e.idle_timeout_s {
                let _ = writeln!(out, "idle_timeout_s = {idle}");
            }
            let _ = writeln!(out, "user_env = {}", list(&e.user_env));
        }
        out
    }
}

impl Entry {
    /// Semantic problems as (field, message).
    fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.command.trim().is_empty() {
            out.push(("command".to_owned(), "must not be empty".to_owned()));
        }
        if self.idle_timeout_s == Some(0) {
            out.push(("idle_timeout_s".to_owned(), "must be at least 1".to_owned()));
        }
        let bad_name = |k: &String| k.is_empty() || k.contains('=') || k.contains('\0');
        for key in self.env.keys().filter(|k| bad_name(k)) {
            out.push((
                format!("env.{key}"),
                "variable names must not be empty or contain \"=\"".to_owned(),
            ));
        }
        for (i, key) in self.user_env.iter().enumerate() {
            if bad_name(key) {
                out.push((
                    format!("user_env[{i}]"),
                    "variable names must not be empty or contain \"=\"".to_owned(),
                ));
            } else if key == "PATH" {
                // The program is found with the gateway's PATH; a user's PATH would only mislead.
                out.push((
                    format!("user_env[{i}]"),
                    "PATH cannot be left to user configurations".to_owned(),
                ));
            }
        }
        out
    }
}

/// A bare TOML key when possible, else a quoted one.
fn quote_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    {
        key.to_owned()
    } else {
        toml::Value::String(key.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EffectiveConfig;

    #[test]
    fn entries_are_read_checked_and_printed_redacted() {
        let c = EffectiveConfig::from_toml_str(
            "[stdio_servers.memory]\ncommand = \"npx\"\nargs = [\"-y\", \"m\"]\nenv = { TOKEN = \"hunter2\" }\npolicy = \"shared\"\nuser_env = [\"API_KEY\"]\n",
            "gw.toml",
        )
        .expect("valid");
        let servers = c.stdio_servers.servers();
        assert_eq!(servers["memory"].args, ["-y", "m"]);
        assert_eq!(servers["memory"].policy, StdioPolicy::Shared);
        let text = c.to_toml();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("[stdio_servers.memory]  # gw.toml"), "{text}");
        assert!(text.contains("env = { TOKEN = \"REDACTED\" }"), "{text}");
        let again = EffectiveConfig::from_toml_str(&text, "printed.toml").expect("round trip");
        assert_eq!(
            again.stdio_servers.servers()["memory"].user_env,
            ["API_KEY"]
        );
        let default =
            EffectiveConfig::from_toml_str("[stdio_servers.m]\ncommand = \"x\"\n", "gw.toml")
                .expect("valid");
        assert_eq!(
            default.stdio_servers.servers()["m"].policy,
            StdioPolicy::PerPrincipal
        );
    }

    #[test]
    fn bad_entries_name_the_field() {
        let problems: Vec<String> = EffectiveConfig::from_toml_str(
            "[stdio_servers.a]\ncommand = \"\"\nidle_timeout_s = 0\nuser_env = [\"PATH\"]\n[stdio_servers.b]\ncommand = \"x\"\nargz = []\n[stdio_servers.c]\ncommand = \"x\"\npolicy = \"sometimes\"\n",
            "gw.toml",
        )
        .expect_err("invalid")
        .problems()
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(
            problems.contains(&"gw.toml: stdio_servers.a.command: must not be empty".to_owned()),
            "{problems:?}"
        );
        assert!(
            problems.contains(
                &"gw.toml: stdio_servers.a.user_env[0]: PATH cannot be left to user configurations"
                    .to_owned()
            ),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("gw.toml: stdio_servers.b: unknown field `argz`")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("gw.toml: stdio_servers.c: unknown variant `sometimes`")),
            "{problems:?}"
        );
    }
}
