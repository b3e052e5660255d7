//! Which stdio programs a user configuration may start, and how ([`StdioRules`]).
//!
//! A user configuration is untrusted: a program the operator allowed runs any code when the
//! configuration also picks its arguments (`node -e ...`, `python -c ...`), its environment
//! (`NODE_OPTIONS`, `LD_PRELOAD`, `PATH`) or its working directory (`npx` runs what the
//! directory's `package.json` names). So the operator describes stdio servers in a catalog
//! ([`StdioServer`]) and a backend names an entry (`"stdio": "memory"`), setting at most the
//! `env` keys the entry lists. Free-form `command` backends are refused unless the operator trusts
//! config authors ([`StdioRules::trust_user_commands`]); the older allow-list of programs
//! ([`StdioRules::allowed_commands`]) still admits a listed `command`, but without `args` or `cwd`
//! and without variables that change how programs load or run ([`is_loader_variable`]).
//!
//! The same rules are checked when a configuration is loaded (the gateway reports every
//! [`Refusal`] with its field path) and again before a process is started.

use std::collections::BTreeMap;
#[cfg(feature = "stdio")]
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use mcp_config_store::{BackendConfig, StdioPolicy};

/// One operator-defined stdio server (`[stdio_servers.NAME]` of the gateway configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StdioServer {
    /// The program: an absolute path, or a name looked up on the gateway's own `PATH`.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its environment (besides the gateway's `PATH`).
    pub env: BTreeMap<String, String>,
    /// Its working directory (default: the gateway's).
    pub cwd: Option<PathBuf>,
    /// One process per principal (the default) or one shared by every principal.
    pub policy: StdioPolicy,
    /// How long a per-principal process lives without calls (default 300 s).
    pub idle_timeout: Option<Duration>,
    /// Environment variables a user configuration may set for this server (`env` of the backend).
    pub user_env: Vec<String>,
}

impl StdioServer {
    /// An entry running `command` without arguments, one process per principal.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            policy: StdioPolicy::PerPrincipal,
            idle_timeout: None,
            user_env: Vec::new(),
        }
    }
}

/// The operator's rules for stdio backends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioRules {
    /// The catalog: servers by name (what `"stdio": "NAME"` refers to).
    pub servers: BTreeMap<String, StdioServer>,
    /// Programs a free-form `command` may name (verbatim), without `args`, `cwd` or loader
    /// variables in `env` (the older `backends.stdio_allowed_commands`).
    pub allowed_commands: Vec<String>,
    /// Config authors are trusted: any free-form `command`, `args`, `env`, `cwd`, and
    /// `stdio_policy = "shared"` is honoured.
    pub trust_user_commands: bool,
}

/// A finding about one backend, the field (relative to the backend, e.g. `env.PATH`) and the
/// reason: why it may not run ([`StdioRules::check`]), or what deserves attention
/// ([`StdioRules::warnings`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Field path relative to the backend entry (`command`, `args`, `env.LD_PRELOAD`, `stdio`).
    pub field: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl Refusal {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// How to start the process of one backend, as the rules allow it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Launch {
    /// The catalog entry, for catalog backends.
    pub(crate) entry: Option<String>,
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    /// The entry's environment with the user's listed keys on top (sorted by name).
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: Option<PathBuf>,
    /// One process for every principal.
    pub(crate) shared: bool,
    pub(crate) idle_timeout: Option<Duration>,
}

const CATALOG_HINT: &str = "define a [stdio_servers.NAME] entry in the gateway configuration and write \"stdio\": \"NAME\" instead, or the operator sets backends.trust_user_commands = true";

impl StdioRules {
    /// Every reason `backend` may not run (empty: it may). Not a stdio backend: nothing.
    pub fn check(&self, backend: &BackendConfig) -> Vec<Refusal> {
        match self.launch(backend) {
            Ok(_) => Vec::new(),
            Err(refusals) => refusals,
        }
    }

    /// What works but deserves the operator's attention: a free-form `command` admitted by the
    /// older allow-list, a `stdio_policy = "shared"` that is not honoured.
    pub fn warnings(&self, backend: &BackendConfig) -> Vec<Refusal> {
        let mut out = Vec::new();
        if backend.command.is_none() || self.trust_user_commands {
            return out;
        }
        out.push(Refusal::new(
            "command",
            format!(
                "free-form stdio commands admitted by backends.stdio_allowed_commands run without args, cwd or loader variables; {CATALOG_HINT}"
            ),
        ));
        if backend.stdio_policy == Some(StdioPolicy::Shared) {
            out.push(Refusal::new(
                "stdio_policy",
                "\"shared\" is honoured only with backends.trust_user_commands or a shared [stdio_servers] entry: each principal gets its own process",
            ));
        }
        out
    }

    /// The process `backend` runs, or every reason it may not.
    pub(crate) fn launch(&self, backend: &BackendConfig) -> Result<Launch, Vec<Refusal>> {
        if let Some(name) = &backend.stdio {
            return self.catalog_launch(name, backend);
        }
        let Some(command) = &backend.command else {
            return Err(vec![Refusal::new("command", "not a stdio backend")]);
        };
        let mut refusals = Vec::new();
        if !self.trust_user_commands {
            if !self.allowed_commands.contains(command) {
                let message = if self.allowed_commands.is_empty() {
                    format!("free-form stdio commands are refused: {CATALOG_HINT}")
                } else {
                    format!(
                        "`{command}` is not in backends.stdio_allowed_commands (the operator's allow-list of stdio backend programs); {CATALOG_HINT}"
                    )
                };
                refusals.push(Refusal::new("command", message));
            }
            if !backend.args.is_empty() {
                refusals.push(Refusal::new(
                    "args",
                    format!(
                        "arguments of a free-form command are refused (they can make an allowed program run any code); {CATALOG_HINT}"
                    ),
                ));
            }
            if backend.cwd.is_some() {
                refusals.push(Refusal::new(
                    "cwd",
                    format!(
                        "the working directory of a free-form command is refused (it can change what the program runs); {CATALOG_HINT}"
                    ),
                ));
            }
            for key in backend.env.keys().filter(|k| is_loader_variable(k)) {
                refusals.push(Refusal::new(
                    format!("env.{key}"),
                    format!(
                        "variables that change how programs load or run are refused; {CATALOG_HINT}"
                    ),
                ));
            }
        }
        if !refusals.is_empty() {
            return Err(refusals);
        }
        Ok(Launch {
            entry: None,
            command: command.clone(),
            args: backend.args.clone(),
            env: backend
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cwd: backend.cwd.clone(),
            shared: self.trust_user_commands && backend.stdio_policy == Some(StdioPolicy::Shared),
            idle_timeout: backend.idle_timeout_s.map(Duration::from_secs),
        })
    }

    fn catalog_launch(&self, name: &str, backend: &BackendConfig) -> Result<Launch, Vec<Refusal>> {
        let Some(server) = self.servers.get(name) else {
            return Err(vec![Refusal::new(
                "stdio",
                format!("no stdio server {name:?} in the gateway's [stdio_servers] catalog"),
            )]);
        };
        let refusals: Vec<Refusal> = backend
            .env
            .keys()
            .filter(|key| !server.user_env.contains(key))
            .map(|key| {
                let settable = if server.user_env.is_empty() {
                    "none".to_owned()
                } else {
                    server.user_env.join(", ")
                };
                Refusal::new(
                    format!("env.{key}"),
                    format!(
                        "not settable for stdio server {name:?} (the operator's [stdio_servers.{name}] user_env lists: {settable})"
                    ),
                )
            })
            .collect();
        if !refusals.is_empty() {
            return Err(refusals);
        }
        let mut env = server.env.clone();
        env.extend(backend.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(Launch {
            entry: Some(name.to_owned()),
            command: server.command.clone(),
            args: server.args.clone(),
            env: env.into_iter().collect(),
            cwd: server.cwd.clone(),
            shared: server.policy == StdioPolicy::Shared,
            idle_timeout: server.idle_timeout,
        })
    }
}

/// Whether an environment variable changes how programs are found, loaded or run (the dynamic
/// loader, language runtimes and package managers, shells, proxies and certificate stores):
/// a user configuration may not set it for an allow-listed command. Compared case-insensitively.
pub fn is_loader_variable(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH",
        "HOME",
        "TMPDIR",
        "SHELL",
        "ENV",
        "BASH_ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "IFS",
        "CDPATH",
        "CLASSPATH",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RES_OPTIONS",
        "LOCALDOMAIN",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "ZDOTDIR",
        "SSLKEYLOGFILE",
        "PHPRC",
        "PHP_INI_SCAN_DIR",
        "ERL_AFLAGS",
        "ERL_FLAGS",
        "ERL_ZFLAGS",
        "ERL_LIBS",
        "GOTOOLCHAIN",
        "GOPROXY",
        "GOPATH",
        "GOROOT",
        "R_PROFILE",
        "R_PROFILE_USER",
        "R_ENVIRON",
        "R_ENVIRON_USER",
        "JULIA_LOAD_PATH",
        "JULIA_DEPOT_PATH",
    ];
    const PREFIXES: &[&str] = &[
        "LD_",
        "DYLD_",
        "NODE_",
        "NPM_",
        "YARN_",
        "PNPM_",
        "COREPACK_",
        "BUN_",
        "DENO_",
        "PYTHON",
        "PIP_",
        "UV_",
        "VIRTUAL_ENV",
        "CONDA",
        "PERL",
        "RUBY",
        "GEM_",
        "BUNDLE_",
        "LUA_",
        "TCL",
        "GIT_",
        "MALLOC_",
        "OPENSSL_",
        "XDG_",
        "GOFLAGS",
        "CARGO_",
        "RUSTC",
        "RUSTFLAGS",
        "DOTNET_",
        "COMPlus_",
        "CORECLR_",
        "JAVA_",
        "JDK_",
        "MAVEN_",
        "GRADLE_",
        "PHP_",
        "ELIXIR_",
        "MIX_",
        "BEAM_",
    ];
    let upper = name.to_ascii_uppercase();
    EXACT.contains(&upper.as_str())
        || PREFIXES
            .iter()
            .any(|p| upper.starts_with(&p.to_ascii_uppercase()))
}

/// The program `command` names, as an absolute path found with the gateway's own `PATH` (never
/// the configuration's): a path with a `/` is taken relative to the gateway's working directory.
#[cfg(feature = "stdio")]
pub(crate) fn resolve_program(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let path = Path::new(command);
        return if path.is_absolute() {
            Some(path.to_path_buf())
        } else {
            std::env::current_dir().ok().map(|dir| dir.join(path))
        };
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

#[cfg(feature = "stdio")]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(json: &str) -> BackendConfig {
        serde_json::from_str(json).expect("backend")
    }

    fn fields(refusals: &[Refusal]) -> Vec<&str> {
        refusals.iter().map(|r| r.field.as_str()).collect()
    }

    #[test]
    fn the_allow_list_admits_the_command_alone() {
        let rules = StdioRules {
            allowed_commands: vec!["node".into()],
            ..StdioRules::default()
        };
        assert!(rules.check(&backend(r#"{"command":"node"}"#)).is_empty());
        let refused = rules.check(&backend(
            r#"{"command":"node","args":["-e","x"],"cwd":"/tmp","env":{"NODE_OPTIONS":"--require /x","ld_preload":"/x","API_KEY":"k"}}"#,
        ));
        assert_eq!(
            fields(&refused),
            ["args", "cwd", "env.NODE_OPTIONS", "env.ld_preload"]
        );
        assert_eq!(
            fields(&rules.check(&backend(r#"{"command":"python"}"#))),
            ["command"]
        );
        let trusted = StdioRules {
            trust_user_commands: true,
            ..StdioRules::default()
        };
        let launch = trusted
            .launch(&backend(
                r#"{"command":"x","args":["-e"],"env":{"PATH":"/evil"},"stdio_policy":"shared"}"#,
            ))
            .expect("trusted");
        assert!(launch.shared);
    }

    #[test]
    fn a_catalog_entry_takes_only_its_listed_env_keys() {
        let mut server = StdioServer::new("/usr/bin/memory");
        server.env.insert("MODE".into(), "strict".into());
        server.user_env = vec!["API_KEY".into()];
        let rules = StdioRules {
            servers: BTreeMap::from([("memory".to_owned(), server)]),
            ..StdioRules::default()
        };
        let launch = rules
            .launch(&backend(r#"{"stdio":"memory","env":{"API_KEY":"k"}}"#))
            .expect("allowed");
        assert_eq!(
            launch.env,
            [
                ("API_KEY".to_owned(), "k".to_owned()),
                ("MODE".to_owned(), "strict".to_owned())
            ]
        );
        assert!(!launch.shared);
        assert_eq!(
            fields(&rules.check(&backend(r#"{"stdio":"memory","env":{"MODE":"lax"}}"#))),
            ["env.MODE"]
        );
        assert_eq!(
            fields(&rules.check(&backend(r#"{"stdio":"other"}"#))),
            ["stdio"]
        );
    }

    #[test]
    #[cfg(feature = "stdio")]
    fn programs_resolve_with_the_gateway_path() {
        let sh = resolve_program("sh").expect("sh on PATH");
        assert!(sh.is_absolute(), "{sh:?}");
        assert_eq!(resolve_program("/bin/x"), Some(PathBuf::from("/bin/x")));
        assert_eq!(resolve_program("no-such-program-here"), None);
    }
}
