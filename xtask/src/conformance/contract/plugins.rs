//! book: docs/src/failure-modes.md rows: a gateway with a plugin document (`tool_filter` denying `echo`, reloaded
//! every 50 ms) denies with the plugin's code, fails plugin-governed calls closed after an
//! invalid edit, and a gateway whose document is invalid at startup refuses to start.
//!
//! Not run here: "soft plugin error → logged, the call proceeds". Only a plugin's own failure
//! (`PluginError`) is soft, and none of the built-in kinds fails on a payload the gateway lets
//! through (JSON-RPC params are always JSON); the binary cannot load custom plugins. The
//! in-process tests of `mcp-plugins` (chain) cover it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::super::gateway::{self, RunningGateway};
use super::super::http::Answer;
use super::{PATH, Rows, expect_rpc_error, modern, modern_headers};

/// Denies upstream tool `echo` (default code -32600).
const DENY_ECHO: &str = "version = 1\n[[plugins]]\nname = \"no-echo\"\nkind = \"tool_filter\"\nconfig = { deny = [\"echo\"] }\n";
/// Not a valid plugin document: an unknown plugin kind.
const INVALID: &str = "version = 1\n[[plugins]]\nname = \"x\"\nkind = \"no_such_kind\"\n";
/// Longest wait for the gateway to pick up an edited document.
const RELOAD_WAIT: Duration = Duration::from_secs(15);

/// The rows; `store` is the `[config_store]` section of the contract run (Redis), `alice`'s
/// virtual host `vh` holds backend `alpha`.
pub(super) fn rows(
    rows: &mut Rows,
    binary: &Path,
    store: &str,
    env: &[(&str, &str)],
    work: &Path,
) -> Result<(), String> {
    let dir = work.join("gateway-plugins");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let document = dir.join("plugins.toml");
    write(&document, DENY_ECHO)?;
    let sections = format!(
        "{store}\n[plugins]\nconfig = \"{}\"\nreload_interval_ms = 50\n",
        document.display()
    );
    let gw = RunningGateway::start_with(binary, &dir, &sections, env)?;
    let token = gw.token("alice")?;
    let call = |rows: &Rows| {
        let body = modern(
            "tools/call",
            json!({"name": "alpha-echo", "arguments": {"text": "hi"}}),
        );
        let headers = modern_headers(&token, "tools/call", Some("alpha-echo"));
        rows.post_at(gw.addr, PATH, &headers, &body)
    };
    let answer = call(rows);
    rows.check(
        "plugins plugin denies a call → MCP error with the plugin's code (default -32600)",
        answer,
        |a| expect_rpc_error(a, -32600, "Tool not allowed: alpha-echo"),
    );
    write(&document, INVALID)?;
    let answer = until(|| call(rows), |a| a.json_rpc()["error"]["code"] == -32603);
    rows.check(
        "plugins invalid plugin config on reload → plugin-governed calls fail closed (-32603)",
        answer,
        |a| expect_rpc_error(a, -32603, "Plugins unavailable"),
    );
    drop(gw);
    let refused_dir = work.join("gateway-plugins-invalid");
    std::fs::create_dir_all(&refused_dir)
        .map_err(|e| format!("cannot create {}: {e}", refused_dir.display()))?;
    let (refused, stderr) = gateway::serve_refused(binary, &refused_dir, &sections)?;
    let verdict = if !refused {
        Err(format!("serve did not refuse to start: {stderr}"))
    } else if stderr.contains("plugins.toml: plugins[0].kind") {
        Ok(Answer::default())
    } else {
        Err(format!("the message does not name the field: {stderr}"))
    };
    rows.check(
        "plugins invalid plugin config document at startup → serve refuses to start, naming the \
         field",
        verdict,
        |_| Ok(()),
    );
    Ok(())
}

/// Asks `ask` until `done` holds for its answer (at most [`RELOAD_WAIT`]); the last answer.
fn until(
    ask: impl Fn() -> Result<Answer, String>,
    done: impl Fn(&Answer) -> bool,
) -> Result<Answer, String> {
    let deadline = Instant::now() + RELOAD_WAIT;
    loop {
        let answer = ask()?;
        if done(&answer) || Instant::now() >= deadline {
            return Ok(answer);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn write(path: &Path, content: &str) -> Result<(), String> {
    std::fs::write(path, content).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
