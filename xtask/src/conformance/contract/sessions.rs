//! book: docs/src/failure-modes.md rows (routing and backends) in 2025 sessions: a backend that failed at `initialize`, the
//! legacy error code of a wrong name, a request on a node that does not own the session (local
//! store), and sessions that survive a restart and move between nodes (Redis and sealed stores).

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use super::super::gateway::RunningGateway;
use super::super::http::Answer;
use super::{PATH, Rows, bearer, expect_rpc_error, expect_status};

/// The environment variable holding the sealed store's key ring.
const KEYS_VAR: &str = "MCP_GATEWAY_CONFORMANCE_SESSION_KEYS";
/// A throwaway key ring for this run's private gateway processes (one 32-byte key).
const KEYS: &str = "c1:BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY=";

/// A 2025 request body.
fn legacy(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}).to_string()
}

/// The headers of a request in 2025 session `session`.
fn in_session(token: &str, session: &str) -> Vec<(&'static str, String)> {
    vec![
        bearer(token),
        ("Mcp-Session-Id", session.to_owned()),
        ("MCP-Protocol-Version", "2025-11-25".to_owned()),
    ]
}

/// Opens a 2025 session at `addr` (initialize, then `notifications/initialized`): the
/// initialize answer and the session id, if one was given.
fn open_session(
    rows: &Rows,
    addr: SocketAddr,
    token: &str,
) -> Result<(Answer, Option<String>), String> {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "contract", "version": "0"}}})
    .to_string();
    let opened = rows.post_at(addr, PATH, &[bearer(token)], &initialize)?;
    let session = opened.header("mcp-session-id").map(str::to_owned);
    if let Some(session) = &session {
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        rows.post_at(
            addr,
            PATH,
            &in_session(token, session),
            &initialized.to_string(),
        )?;
    }
    Ok((opened, session))
}

/// `tools/list` in `session` at `addr`.
fn list_in(rows: &Rows, addr: SocketAddr, token: &str, session: &str) -> Result<Answer, String> {
    let list = legacy("tools/list", json!({}));
    rows.post_at(addr, PATH, &in_session(token, session), &list)
}

/// The answer is a tools/list result naming `alpha-echo`.
fn expect_alpha_listed(answer: &Answer) -> Result<(), String> {
    expect_status(answer, 200)?;
    let tools = answer.json_rpc()["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if tools.iter().any(|t| t["name"] == "alpha-echo") {
        Ok(())
    } else {
        Err("alpha-echo missing from the list".to_owned())
    }
}

/// The rows of one 2025 session on `gw` (local session store; the virtual host holds `alpha`
/// and the unreachable `dead`), and of the same session id sent to another node.
pub(super) fn local_rows(rows: &mut Rows, gw: &RunningGateway, work: &Path) -> Result<(), String> {
    let token = gw.token("alice")?;
    let (opened, session) = open_session(rows, gw.addr, &token)?;
    let Some(session) = session else {
        rows.check(
            "backends backend unreachable during a 2025 initialize → the session opens",
            Ok(opened),
            |_| Err("initialize gave no Mcp-Session-Id".to_owned()),
        );
        return Ok(());
    };
    let answer = list_in(rows, gw.addr, &token, &session);
    rows.check(
        "backends backend unreachable during a 2025 initialize → the session opens, its list has the \
         other backends",
        answer,
        expect_alpha_listed,
    );
    let call = |name: &str| {
        legacy(
            "tools/call",
            json!({"name": name, "arguments": {"text": "hi"}}),
        )
    };
    let headers = in_session(&token, &session);
    let answer = rows.post(PATH, &headers, &call("dead-echo"));
    rows.check(
        "routing backend entry without a running upstream (it failed at initialize) → JSON-RPC error \
         naming it",
        answer,
        |a| expect_rpc_error(a, -32603, "Backend dead"),
    );
    let answer = rows.post(PATH, &headers, &call("nope-echo"));
    rows.check(
        "routing wrong tool name in a 2025 session → -32603 (the 2025 code) wrong tool name",
        answer,
        |a| expect_rpc_error(a, -32603, "wrong tool name"),
    );
    let other = gw.another_node(&work.join("gateway-node-b"))?;
    let answer = list_in(rows, other.addr, &token, &session);
    rows.check(
        "backends request on a node that does not own the session (local store) → 404",
        answer,
        |a| expect_status(a, 404),
    );
    Ok(())
}

/// With the Redis and the sealed session store: a session survives a restart and is served by
/// another node. `sections` configure the contract run's gateway (its Redis at `redis_port`),
/// `env` its environment.
pub(super) fn shared_rows(
    rows: &mut Rows,
    binary: &Path,
    sections: &str,
    redis_port: u16,
    env: &[(&str, &str)],
    work: &Path,
) -> Result<(), String> {
    let redis = format!(
        "{sections}\n[sessions]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:{redis_port}\"\n"
    );
    let sealed = format!("{sections}\n[sessions]\nkind = \"sealed\"\nkeys_env = \"{KEYS_VAR}\"\n");
    let mut sealed_env = env.to_vec();
    sealed_env.push((KEYS_VAR, KEYS));
    for (store, sections, env) in [
        ("Redis", redis, env.to_vec()),
        ("sealed", sealed, sealed_env),
    ] {
        let dir = work.join(format!("gateway-{}-sessions", store.to_lowercase()));
        let mut gw = RunningGateway::start_with(binary, &dir, &sections, &env)?;
        survives(rows, &mut gw, store, &dir)?;
    }
    Ok(())
}

/// With session store `store` (`gw` configured so): a session survives a restart and is served
/// by another node (files in `dir`).
fn survives(
    rows: &mut Rows,
    gw: &mut RunningGateway,
    store: &str,
    dir: &Path,
) -> Result<(), String> {
    let restart_row =
        format!("backends gateway restart ({store} session store) → the 2025 session survives");
    let token = gw.token("alice")?;
    let (opened, session) = open_session(rows, gw.addr, &token)?;
    let Some(session) = session else {
        rows.check(&restart_row, Ok(opened), |_| {
            Err("initialize gave no Mcp-Session-Id".to_owned())
        });
        return Ok(());
    };
    gw.restart()?;
    let answer = list_in(rows, gw.addr, &token, &session);
    rows.check(&restart_row, answer, expect_alpha_listed);
    let other = gw.another_node(&dir.join("node-b"))?;
    let answer = list_in(rows, other.addr, &token, &session);
    rows.check(
        &format!("backends request on another node ({store} session store) → served"),
        answer,
        expect_alpha_listed,
    );
    Ok(())
}
