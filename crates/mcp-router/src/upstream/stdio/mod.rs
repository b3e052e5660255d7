//! stdio backends: MCP servers the gateway runs as child processes, speaking newline-delimited
//! JSON-RPC on stdin/stdout.
//!
//! - **Who may be spawned**: what the operator's [`StdioRules`] allow ([`catalog`]): an entry of
//!   the operator's catalog (`"stdio": "NAME"`), or a free-form `command` only where the operator
//!   allows it; a user configuration alone never starts anything ([`UpstreamError::NotAllowed`]).
//! - **Program**: resolved to an absolute path with the gateway's own `PATH` before the spawn,
//!   never with a `PATH` of the configuration.
//! - **Environment**: explicit. The child gets the gateway's `PATH` (so `npx`/`uvx` resolve) and
//!   the entry's `env` (with the user's listed keys), nothing else of the gateway's environment
//!   (no inherited secrets).
//! - **One process, many callers**: the process carries a link (`upstream::link`) (process-unique ids `g<n>`,
//!   responses and `notifications/progress` back to the caller that asked; a server's own
//!   requests and log messages to the call they belong to — the one whose progress token they
//!   carry, or the only call in flight of a per-principal process — else declined with `-32601`
//!   or dropped; `notifications/cancelled` for a caller that goes away). The handshake declares
//!   the client capabilities the gateway relays (`sampling`, `elicitation`, `roots`). stderr
//!   lines are logged with the backend's name.
//! - **Era**: probed once per process, as the spec recommends for stdio: `server/discover`
//!   (2026-07-28: every request then carries the per-request `_meta`), else `initialize` +
//!   `notifications/initialized` (2025). Callers never see an upstream session.
//! - **Policy**: one process per principal (the default; ended after the idle timeout without
//!   calls, default 300 s), or one shared by every principal where the catalog entry says
//!   `policy = "shared"` (or, for free-form commands, `stdio_policy = "shared"` with
//!   `trust_user_commands`). Processes are keyed by the whole launch (entry or program, arguments,
//!   environment with the user's values, working directory) and the principal unless shared. At
//!   most `max_processes` run at once, 8 of them one principal's
//!   (shared processes count for nobody); beyond that a call fails at once.
//! - **Crashes**: a process that exits fails its calls in flight (`backend connection lost`),
//!   is reaped, and is started again by the next call after a backoff (100 ms doubling to 5 s) —
//!   until then calls fail at once. The backend's circuit breaker sees every failure.

//!
//! Without the feature `stdio` the operator's rules are still read (a configuration naming a
//! command is checked the same way), but no process is ever started: a stdio backend's calls
//! fail with [`UpstreamError::TransportDisabled`].

pub(crate) mod catalog;
#[cfg(feature = "stdio")]
mod process;

#[cfg(not(feature = "stdio"))]
pub(crate) use super::disabled::StdioPool;
#[cfg(feature = "stdio")]
pub(crate) use process::StdioPool;

/// What names a stdio backend (for its breaker): `server:<entry>` for a catalog entry, the
/// command for a free-form one; `None` for an HTTP backend.
pub(crate) fn label(config: &mcp_config_store::BackendConfig) -> Option<String> {
    match (&config.stdio, &config.command) {
        (Some(entry), _) => Some(format!("server:{entry}")),
        (None, Some(command)) => Some(command.clone()),
        (None, None) => None,
    }
}
