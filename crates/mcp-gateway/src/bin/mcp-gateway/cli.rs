//! Command-line arguments (the book: docs/src/gateway.md operator contract: `serve`, `check-config`, `token`,
//! `--config`; extended with `config-keys`, `--print-config`, `--set` and shortcuts).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use mcp_gateway::config::Override;

/// The reference MCP gateway.
///
/// Configuration: a TOML file (--config, else $MCP_GATEWAY_CONFIG, else ./gateway.toml when it
/// exists), then MCP_GATEWAY_* environment variables (MCP_GATEWAY_ + key with '.' -> '_',
/// upper-cased, e.g. MCP_GATEWAY_LISTEN_ADDR for listen.addr), then command-line flags.
/// Exit codes: 0 success, 1 runtime failure, 2 invalid configuration or usage.
#[derive(Debug, Parser)]
#[command(name = "mcp-gateway", version)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// Options accepted before or after the subcommand.
#[derive(Debug, Args)]
pub(crate) struct GlobalArgs {
    /// The configuration file (TOML).
    #[arg(short, long, global = true, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long, global = true)]
    pub(crate) print_config: bool,
    /// Override any key, e.g. --set limits.max_connections=100 (repeatable; lists comma-separated).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE", value_parser = Override::parse_assignment)]
    pub(crate) set: Vec<Override>,
    /// Shortcut for --set listen.addr=ADDR.
    #[arg(long, global = true, value_name = "ADDR")]
    pub(crate) listen: Option<String>,
    /// Shortcut for --set listen.admin_addr=ADDR ("" disables the admin listener).
    #[arg(long, global = true, value_name = "ADDR")]
    pub(crate) admin_listen: Option<String>,
    /// Shortcut for --set telemetry.log_level=FILTER.
    #[arg(long, global = true, value_name = "FILTER")]
    pub(crate) log_level: Option<String>,
    /// Shortcut for --set telemetry.log_format=pretty|json.
    #[arg(long, global = true, value_name = "FORMAT")]
    pub(crate) log_format: Option<String>,
}

impl GlobalArgs {
    /// Every override, shortcuts first so that an explicit --set wins.
    pub(crate) fn overrides(&self) -> Vec<Override> {
        let mut out = Vec::new();
        let shortcuts = [
            (&self.listen, "listen.addr", "--listen"),
            (&self.admin_listen, "listen.admin_addr", "--admin-listen"),
            (&self.log_level, "telemetry.log_level", "--log-level"),
            (&self.log_format, "telemetry.log_format", "--log-format"),
        ];
        for (value, key, flag) in shortcuts {
            if let Some(value) = value {
                out.push(Override::new(key, value.clone(), flag));
            }
        }
        out.extend(self.set.iter().cloned());
        out
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the gateway (the default when no subcommand is given).
    Serve,
    /// Validate the process configuration and every user configuration; exit 2 on a problem.
    CheckConfig,
    /// Mint an HS256 development token with the configured secret, issuer and audience.
    Token(TokenArgs),
    /// Print every configuration key with its type, default and environment variable.
    ConfigKeys,
    /// Print every metric on the admin listener's /metrics with its type, meaning and labels.
    MetricTable,
    /// Manage user configurations in the configured store (file or Redis): checked like
    /// check-config before writing, written atomically, announced to every node.
    #[command(subcommand)]
    Users(UsersCommand),
}

/// `mcp-gateway users ...`. KEY is what the gateway looks up: `<sub>`, or `<issuer>#<sub>` when
/// several issuers are trusted.
#[derive(Debug, Subcommand)]
pub(crate) enum UsersCommand {
    /// Check a user configuration (JSON) and store it as KEY's; refused as check-config would.
    Put(DocumentArgs),
    /// Print KEY's stored configuration (JSON); exit 1 when there is none.
    Get(KeyArgs),
    /// Print every key that has a configuration, one per line.
    List,
    /// Delete KEY's configuration; exit 1 when there is none.
    Delete(KeyArgs),
    /// Check a user configuration (JSON) as KEY's without storing it.
    Check(DocumentArgs),
}

#[derive(Debug, Args)]
pub(crate) struct KeyArgs {
    /// `<sub>` or `<issuer>#<sub>`.
    pub(crate) key: String,
}

#[derive(Debug, Args)]
pub(crate) struct DocumentArgs {
    /// `<sub>` or `<issuer>#<sub>`.
    pub(crate) key: String,
    /// The JSON document ("-" or absent: standard input).
    #[arg(long, value_name = "PATH")]
    pub(crate) file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct TokenArgs {
    /// The subject (`sub`): whose user configuration the gateway loads.
    #[arg(long, value_name = "SUBJECT")]
    pub(crate) sub: String,
    /// Lifetime: 90s, 15m, 1h, 7d (default 1h).
    #[arg(long, default_value = "1h", value_parser = mcp_gateway::token::parse_ttl)]
    pub(crate) ttl: std::time::Duration,
    /// Scopes (repeatable; default: auth.jwt.required_scopes).
    #[arg(long = "scope", value_name = "SCOPE")]
    pub(crate) scopes: Vec<String>,
    /// Audience (default: the first configured audience).
    #[arg(long, value_name = "AUDIENCE")]
    pub(crate) aud: Option<String>,
    /// Issuer (default: the first configured issuer).
    #[arg(long, value_name = "ISSUER")]
    pub(crate) iss: Option<String>,
}
