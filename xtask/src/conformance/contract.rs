//! The failure contract (book: docs/src/failure-modes.md) against the running gateway binary: every row that a client
//! can reach over the socket, asserting status, headers and body or JSON-RPC code and message.
//! (The in-process tests in `crates/mcp-gateway/tests/http_contract.rs` and friends cover the same rows through the
//! library; here the process, its configuration and its listeners are the real ones.)
//!
//! Setup: a private `redis-server` as the config store (subjects `alice`, `carol`, and `broken`
//! holding an undecodable document), an rmcp backend `alpha` and a backend `dead` whose port
//! nobody listens on, request limits made small, and a required scope. More gateway processes
//! join for the rows that need them: a second node (local sessions), two nodes each with the
//! Redis and the sealed session store ([`sessions`]), and gateways with a plugin document
//! ([`plugins`]).
//!
//! Rows of the failure contract (book: docs/src/failure-modes.md) not run against the binary, and why:
//! - HTTP "no claims in the request" (400) and the router's re-checks (the router's defence in depth:
//!   missing session id, user config, virtual host id or claims extension → `Routing problem`;
//!   a virtual host absent from the user config → `No configuration`): the binary's own layers
//!   establish these facts before the router runs, so no request can reach them (the router's
//!   unit tests and `crates/mcp-gateway/tests/http_contract.rs` build a router without those layers);
//! - HTTP "key encoding failure" (500): a subject is any JWT `sub` string and every string
//!   encodes as a Redis key, so the binary has no failing key encoding to reach;
//! - routing "no backend entry matches the split name" is the wrong-name row seen from the split
//!   (the split only yields configured backend names), and "more than one backend entry
//!   matches" (-32600) needs two backends that both expose one public name (`a-b-x` as `a` +
//!   `b-x` and as `a-b` + `x`), which the rmcp test backend's fixed tool names cannot give;
//! - plugins "soft plugin error" (see [`plugins`]).

mod plugins;
mod sessions;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::gateway::{self, RunningGateway};
use super::http::{self, Answer};
use super::install::Peers;
use super::outcome::Outcome;
use super::process::{self, Spawned};

/// The run id of the contract rows in the report and the baseline.
pub(crate) const RUN: &str = "contract@gateway";
const PATH: &str = "/servers/vh/mcp";
const SCOPE: &str = "mcp";

/// Runs every row; `redis_server` is the binary to start.
pub(crate) fn run(
    root: &Path,
    peers: &Peers,
    gateway_binary: &Path,
    peer: &Path,
    redis_server: &Path,
    work: &Path,
) -> Result<Vec<Outcome>, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let redis_port = process::free_port()?;
    let redis_addr = process::loopback(redis_port);
    let redis = start_redis(redis_server, redis_port, work)?;

    let alpha_port = process::free_port()?;
    let mut alpha_command = Command::new(peer);
    alpha_command.args(["serve", "alpha", &alpha_port.to_string()]);
    let alpha_log = work.join("backend-alpha.log");
    let mut alpha = Spawned::start("backend alpha", alpha_command, &alpha_log)?;
    alpha.wait_listening(process::loopback(alpha_port), &alpha_log)?;
    // Nobody listens here: connections are refused.
    let dead_port = process::free_port()?;

    let user = json!({"virtual_hosts": {"vh": {"backends": {
        "alpha": {"url": format!("http://127.0.0.1:{alpha_port}/mcp")},
        "dead": {"url": format!("http://127.0.0.1:{dead_port}/mcp")},
    }}}})
    .to_string();
    for (key, value) in [
        ("mcpgw:user:alice", user.as_str()),
        ("mcpgw:user:carol", user.as_str()),
        ("mcpgw:user:broken", "{this is not json"),
    ] {
        redis_set(redis_addr, key, value)?;
    }
    let store_back = || -> Result<Spawned, String> {
        let redis = start_redis(redis_server, redis_port, work)?;
        redis_set(redis_addr, "mcpgw:user:carol", &user)?;
        Ok(redis)
    };
    let store = format!(
        "[config_store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:{redis_port}\"\n\
         key_prefix = \"mcpgw\"\n"
    );
    let limits = |header_bytes: u32| {
        format!(
            "{store}\n\
             [limits]\nmax_body_bytes = 65536\nmax_mcp_headers = 8\n\
             max_mcp_header_bytes = {header_bytes}\n\n\
             [breaker]\nconsecutive_failures = 1000\n"
        )
    };
    let sections = limits(256);
    let env = [("MCP_GATEWAY_AUTH_JWT_REQUIRED_SCOPES", SCOPE)];
    let mut gw =
        RunningGateway::start_with(gateway_binary, &work.join("gateway"), &sections, &env)?;
    let minter = Minter {
        python: peers.python2.clone(),
        script: root.join("tests/conformance/mint_jwt.py"),
        secret: gw.secret().to_owned(),
    };
    let mut rows = Rows {
        addr: gw.addr,
        outcomes: Vec::new(),
    };
    http_rows(&mut rows, &gw, &minter)?;
    routing_rows(&mut rows, &gw)?;
    sessions::local_rows(&mut rows, &gw, work)?;
    restart_row(&mut rows, &mut gw)?;
    // A sealed session id holds the session's record (an upstream session id, version and URL per
    // 2025 backend): longer than the 256 bytes the header-limit rows use, far below the default.
    sessions::shared_rows(
        &mut rows,
        gateway_binary,
        &limits(2048),
        redis_port,
        &env,
        work,
    )?;
    plugins::rows(&mut rows, gateway_binary, &store, &env, work)?;
    // Last: the store outage (redis stopped) for a subject not cached yet.
    outage_rows(&mut rows, &gw, redis, store_back)?;
    Ok(rows.outcomes)
}

/// Starts a private `redis-server` on `port` (nothing saved) and waits until it listens.
fn start_redis(redis_server: &Path, port: u16, work: &Path) -> Result<Spawned, String> {
    let mut command = Command::new(redis_server);
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .current_dir(work);
    let log = work.join(format!("redis-{port}.log"));
    let mut redis = Spawned::start("redis-server", command, &log)?;
    redis.wait_listening(process::loopback(port), &log)?;
    Ok(redis)
}

/// config store: `carol` (not cached yet) during a store outage (`redis` stopped), then once
/// `store_back` restarted it (same port, her document written again).
fn outage_rows(
    rows: &mut Rows,
    gw: &RunningGateway,
    redis: Spawned,
    store_back: impl FnOnce() -> Result<Spawned, String>,
) -> Result<(), String> {
    let carol = gw.token("carol")?;
    drop(redis);
    let list = modern("tools/list", json!({}));
    let headers = modern_headers(&carol, "tools/list", None);
    let answer = rows.post(PATH, &headers, &list);
    rows.check(
        "HTTP/config store config store unreachable (Redis stopped) → 503 + Retry-After",
        answer,
        |a| {
            expect_status(a, 503)?;
            a.header("retry-after")
                .map(|_| ())
                .ok_or_else(|| "no Retry-After".to_owned())
        },
    );
    let _redis = store_back()?;
    // The reconnection happens in the background with a bounded backoff: ask until served.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let answer = rows.post(PATH, &headers, &list);
        let served = answer.as_ref().is_ok_and(|a| a.status == 200);
        if served || std::time::Instant::now() >= deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    rows.check(
        "config store Redis back after a connection loss → reconnected in the background, served again",
        answer,
        |a| {
            expect_status(a, 200)?;
            if a.json_rpc()["result"]["tools"].is_array() {
                Ok(())
            } else {
                Err("no tools/list result".to_owned())
            }
        },
    );
    Ok(())
}

/// The `redis-server` binary: `$REDIS_SERVER_BIN`, else the first on `PATH`.
pub(crate) fn redis_server() -> Option<std::path::PathBuf> {
    if let Some(bin) = std::env::var_os("REDIS_SERVER_BIN") {
        return Some(bin.into()).filter(|path: &std::path::PathBuf| path.is_file());
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join("redis-server"))
        .find(|path| path.is_file())
}

/// Collects one outcome per row.
struct Rows {
    addr: SocketAddr,
    outcomes: Vec<Outcome>,
}

impl Rows {
    fn post(&self, path: &str, headers: &[(&str, String)], body: &str) -> Result<Answer, String> {
        self.post_at(self.addr, path, headers, body)
    }

    /// `post` to another gateway process.
    fn post_at(
        &self,
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, String)],
        body: &str,
    ) -> Result<Answer, String> {
        let mut all = vec![
            ("Content-Type", "application/json".to_owned()),
            ("Accept", "application/json, text/event-stream".to_owned()),
        ];
        all.extend(headers.iter().cloned());
        http::request(addr, "POST", path, &all, body.as_bytes())
    }

    fn check(
        &mut self,
        row: &str,
        answer: Result<Answer, String>,
        expect: impl FnOnce(&Answer) -> Result<(), String>,
    ) {
        let verdict = answer.and_then(|a| {
            expect(&a).map_err(|why| {
                let body: String = a.body.chars().take(300).collect();
                format!("{why} (got {} {body})", a.status)
            })
        });
        let mut outcome = Outcome::new(RUN, row, verdict.is_ok(), "status, headers, body");
        if let Err(why) = verdict {
            outcome.detail = why;
        }
        self.outcomes.push(outcome);
    }
}

/// Mints tokens with `tests/conformance/mint_jwt.py`.
struct Minter {
    python: PathBuf,
    script: PathBuf,
    secret: String,
}

impl Minter {
    fn mint(&self, alg: &str, claims: &Value, secret: Option<&str>) -> Result<String, String> {
        let mut command = Command::new(&self.python);
        command
            .arg(&self.script)
            .arg(secret.unwrap_or(&self.secret))
            .arg(alg)
            .arg(claims.to_string());
        let (ok, out, err) =
            process::output_within("mint_jwt.py", command, Duration::from_secs(30))?;
        if ok {
            Ok(out.trim().to_owned())
        } else {
            Err(format!("mint_jwt.py failed: {err}"))
        }
    }

    /// Good claims for `alice` with `changes` applied (a `null` removes a claim).
    fn claims(changes: &Value) -> Value {
        let mut claims = json!({"sub": "alice", "iss": gateway::ISSUER, "aud": gateway::AUDIENCE,
                                "exp": "now+3600", "iat": "now-10", "scope": SCOPE});
        if let (Some(target), Some(changes)) = (claims.as_object_mut(), changes.as_object()) {
            for (key, value) in changes {
                if value.is_null() {
                    target.remove(key);
                } else {
                    target.insert(key.clone(), value.clone());
                }
            }
        }
        claims
    }
}

fn bearer(token: &str) -> (&'static str, String) {
    ("Authorization", format!("Bearer {token}"))
}

/// A 2026-07-28 request body (the `_meta` every modern request carries).
fn modern(method: &str, mut params: Value) -> String {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string()
}

/// The 2026-07-28 headers of `method` (and `name` for the routed methods).
fn modern_headers(token: &str, method: &str, name: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        bearer(token),
        ("MCP-Protocol-Version", "2026-07-28".to_owned()),
        ("Mcp-Method", method.to_owned()),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name.to_owned()));
    }
    headers
}

fn expect_status(answer: &Answer, status: u16) -> Result<(), String> {
    if answer.status == status {
        Ok(())
    } else {
        Err(format!("expected HTTP {status}"))
    }
}

fn expect_detail(answer: &Answer, status: u16, detail: &str) -> Result<(), String> {
    expect_status(answer, status)?;
    let body: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
    if body == json!({ "detail": detail }) {
        Ok(())
    } else {
        Err(format!("expected body {{\"detail\":\"{detail}\"}}"))
    }
}

fn expect_challenge(answer: &Answer, status: u16, error: &str) -> Result<(), String> {
    expect_status(answer, status)?;
    let challenge = answer.header("www-authenticate").unwrap_or_default();
    if challenge.starts_with("Bearer") && challenge.contains(&format!("error=\"{error}\"")) {
        Ok(())
    } else {
        Err(format!(
            "expected WWW-Authenticate: Bearer error=\"{error}\", got {challenge:?}"
        ))
    }
}

fn expect_rpc_error(answer: &Answer, code: i64, message: &str) -> Result<(), String> {
    let error = &answer.json_rpc()["error"];
    if error["code"] == code
        && error["message"]
            .as_str()
            .is_some_and(|m| m.contains(message))
    {
        Ok(())
    } else {
        Err(format!(
            "expected JSON-RPC error {code} containing {message:?}"
        ))
    }
}

/// HTTP: the HTTP layer, before MCP.
fn http_rows(rows: &mut Rows, gw: &RunningGateway, minter: &Minter) -> Result<(), String> {
    let good = gw.token("alice")?;
    let list = modern("tools/list", json!({}));
    let list_headers = |token: &str| modern_headers(token, "tools/list", None);

    let answer = rows.post("/nowhere", &list_headers(&good), &list);
    rows.check("HTTP path not /servers/{id}/mcp → 400", answer, |a| {
        expect_detail(a, 400, "Not an MCP endpoint path")
    });
    let answer = rows.post("/servers/bad%20id!/mcp", &list_headers(&good), &list);
    rows.check("HTTP invalid virtual host id → 400", answer, |a| {
        expect_detail(a, 400, "Invalid virtual host id")
    });
    let answer = rows.post(PATH, &[], &list);
    rows.check(
        "HTTP missing Authorization → 401 + WWW-Authenticate with resource_metadata",
        answer,
        |a| {
            expect_challenge(a, 401, "invalid_token")?;
            let challenge = a.header("www-authenticate").unwrap_or_default();
            if challenge.contains("resource_metadata=\"") {
                Ok(())
            } else {
                Err("no resource_metadata in the challenge".to_owned())
            }
        },
    );
    let answer = rows.post(PATH, &[("Authorization", "Basic YTpi".to_owned())], &list);
    rows.check("HTTP scheme not Bearer → 401", answer, |a| {
        expect_challenge(a, 401, "invalid_token")
    });
    let answer = rows.post(PATH, &[bearer("not-a-jwt")], &list);
    rows.check("HTTP undecodable JWT → 401", answer, |a| {
        expect_challenge(a, 401, "invalid_token")
    });
    let bad_tokens = [
        (
            "HTTP unsupported algorithm (alg none) → 401",
            "none",
            json!({}),
            None,
        ),
        (
            "HTTP signed with another secret → 401",
            "HS256",
            json!({}),
            Some("another-secret"),
        ),
        (
            "HTTP expired → 401",
            "HS256",
            json!({"exp": "now-3600"}),
            None,
        ),
        (
            "HTTP not yet valid → 401",
            "HS256",
            json!({"nbf": "now+3600"}),
            None,
        ),
        (
            "HTTP wrong issuer → 401",
            "HS256",
            json!({"iss": "https://other.example"}),
            None,
        ),
        (
            "HTTP wrong audience → 401",
            "HS256",
            json!({"aud": "someone-else"}),
            None,
        ),
    ];
    for (row, alg, changes, secret) in bad_tokens {
        let token = minter.mint(alg, &Minter::claims(&changes), secret)?;
        let answer = rows.post(PATH, &list_headers(&token), &list);
        rows.check(row, answer, |a| expect_challenge(a, 401, "invalid_token"));
    }
    let token = minter.mint("HS256", &Minter::claims(&json!({"scope": null})), None)?;
    let answer = rows.post(PATH, &list_headers(&token), &list);
    rows.check(
        "HTTP token lacks the required scope → 403 insufficient_scope",
        answer,
        |a| expect_challenge(a, 403, "insufficient_scope"),
    );
    let nobody = gw.token("nobody")?;
    let answer = rows.post(PATH, &list_headers(&nobody), &list);
    rows.check(
        "HTTP/config store no user config for sub → 400",
        answer,
        |a| expect_detail(a, 400, "No user configuration"),
    );
    let broken = gw.token("broken")?;
    let answer = rows.post(PATH, &list_headers(&broken), &list);
    rows.check(
        "HTTP/config store undecodable user config → 500",
        answer,
        |a| expect_detail(a, 500, "User configuration could not be loaded"),
    );
    let answer = rows.post("/servers/other/mcp", &list_headers(&good), &list);
    rows.check(
        "HTTP virtual host not in the caller's config → 404 {\"detail\":\"Server not found\"}",
        answer,
        |a| {
            expect_status(a, 404)?;
            if a.header("content-type") != Some("application/json") {
                return Err("content-type is not application/json".to_owned());
            }
            if a.body == r#"{"detail":"Server not found"}"# {
                Ok(())
            } else {
                Err("body is not exactly {\"detail\":\"Server not found\"}".to_owned())
            }
        },
    );
    let mut headers = list_headers(&good);
    headers.push(("Origin", "http://evil.example".to_owned()));
    let answer = rows.post(PATH, &headers, &list);
    rows.check("HTTP Origin present and not allowed → 403", answer, |a| {
        expect_status(a, 403)
    });
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(70_000)
    );
    let answer = rows.post(PATH, &list_headers(&good), &big);
    rows.check(
        "HTTP body over limits.max_body_bytes → 413",
        answer,
        |a| expect_status(a, 413),
    );
    let mut headers = list_headers(&good);
    for i in 0..8 {
        headers.push(("Mcp-Param-X", format!("v{i}")));
    }
    let answer = rows.post(PATH, &headers, &list);
    rows.check("HTTP too many Mcp-* headers → 431", answer, |a| {
        expect_status(a, 431)
    });
    let mut headers = list_headers(&good);
    headers.push(("Mcp-Param-X", "x".repeat(300)));
    let answer = rows.post(PATH, &headers, &list);
    rows.check(
        "HTTP an Mcp-* header over the size limit → 431",
        answer,
        |a| expect_status(a, 431),
    );
    Ok(())
}

/// Routing and backends: routing and backend failures are JSON-RPC errors; a dead backend leaves the
/// others working.
fn routing_rows(rows: &mut Rows, gw: &RunningGateway) -> Result<(), String> {
    let token = gw.token("alice")?;
    let call = |name: &str| {
        modern(
            "tools/call",
            json!({"name": name, "arguments": {"text": "hi"}}),
        )
    };
    let answer = rows.post(
        PATH,
        &modern_headers(&token, "tools/call", Some("nope-echo")),
        &call("nope-echo"),
    );
    rows.check(
        "routing tool name matching no backend prefix → -32602 wrong tool name",
        answer,
        |a| expect_rpc_error(a, -32602, "wrong tool name"),
    );
    let wrong_names = [
        (
            "routing resource URI matching no backend prefix → -32602 wrong resource name",
            "resources/read",
            "test://nowhere/x",
            json!({"uri": "test://nowhere/x"}),
            "wrong resource name",
        ),
        (
            "routing prompt name matching no backend prefix → -32602 wrong prompt name",
            "prompts/get",
            "nope-greet",
            json!({"name": "nope-greet", "arguments": {"who": "x"}}),
            "wrong prompt name",
        ),
        (
            "routing completion reference matching no backend prefix → -32602 wrong completion \
             reference",
            "completion/complete",
            "nope-greet",
            json!({"ref": {"type": "ref/prompt", "name": "nope-greet"},
                   "argument": {"name": "who", "value": "a"}}),
            "wrong completion reference",
        ),
    ];
    for (row, method, name, params, message) in wrong_names {
        let headers = modern_headers(&token, method, Some(name));
        let answer = rows.post(PATH, &headers, &modern(method, params));
        rows.check(row, answer, |a| expect_rpc_error(a, -32602, message));
    }
    let answer = rows.post(
        PATH,
        &modern_headers(&token, "tools/list", None),
        &modern("tools/list", json!({})),
    );
    rows.check(
        "backends backend down during a list → the list succeeds, the backend named degraded",
        answer,
        |a| {
            let message = a.json_rpc();
            let tools = message["result"]["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !tools.iter().any(|t| t["name"] == "alpha-echo") {
                return Err("alpha-echo missing from the list".to_owned());
            }
            let degraded = message["result"]["_meta"]["mcp-gateway/degraded"].to_string();
            if degraded.contains("dead") {
                Ok(())
            } else {
                Err(format!(
                    "_meta mcp-gateway/degraded does not name dead: {degraded}"
                ))
            }
        },
    );
    let answer = rows.post(
        PATH,
        &modern_headers(&token, "tools/call", Some("dead-echo")),
        &call("dead-echo"),
    );
    rows.check(
        "backends backend down during a routed call → -32603 Backend dead failed",
        answer,
        |a| expect_rpc_error(a, -32603, "Backend dead failed"),
    );
    let answer = rows.post(
        PATH,
        &modern_headers(&token, "tools/call", Some("alpha-echo")),
        &call("alpha-echo"),
    );
    rows.check(
        "backends other backends unaffected by a dead one → alpha-echo answers",
        answer,
        |a| {
            let text = a.json_rpc()["result"]["content"][0]["text"].clone();
            if text == "alpha: hi" {
                Ok(())
            } else {
                Err(format!("expected text \"alpha: hi\", got {text}"))
            }
        },
    );
    Ok(())
}

/// backends: with the local session store a restart loses the 2025 sessions; the old id gets 404,
/// which makes clients re-initialize.
fn restart_row(rows: &mut Rows, gw: &mut RunningGateway) -> Result<(), String> {
    let token = gw.token("alice")?;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "contract", "version": "0"}}})
    .to_string();
    let opened = rows.post(PATH, &[bearer(&token)], &initialize)?;
    let Some(session) = opened.header("mcp-session-id").map(str::to_owned) else {
        rows.check(
            "backends gateway restart → the old 2025 session id gets 404",
            Ok(opened),
            |_| Err("initialize gave no Mcp-Session-Id".to_owned()),
        );
        return Ok(());
    };
    gw.restart()?;
    rows.addr = gw.addr;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}).to_string();
    let headers = [
        bearer(&token),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25".to_owned()),
    ];
    let answer = rows.post(PATH, &headers, &list);
    rows.check(
        "backends gateway restart (local sessions) → the old 2025 session id gets 404",
        answer,
        |a| expect_status(a, 404),
    );
    Ok(())
}

/// `SET key value` on the Redis server at `addr` (RESP, one round trip).
fn redis_set(addr: SocketAddr, key: &str, value: &str) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("redis SET {key}: {e}");
    let mut stream = TcpStream::connect(addr).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(fail)?;
    let mut command = String::from("*3\r\n$3\r\nSET\r\n");
    for part in [key, value] {
        command.push_str(&format!("${}\r\n{part}\r\n", part.len()));
    }
    stream.write_all(command.as_bytes()).map_err(fail)?;
    let mut reply = [0_u8; 5];
    stream.read_exact(&mut reply).map_err(fail)?;
    if &reply == b"+OK\r\n" {
        Ok(())
    } else {
        Err(format!(
            "redis SET {key}: unexpected reply {:?}",
            String::from_utf8_lossy(&reply)
        ))
    }
}
