//! Load that crosses nodes through a Redis failover: two `mcp-gateway` processes behind HAProxy
//! (the configuration of `examples/two-nodes/haproxy.cfg`, ports rewritten), sharing user
//! configurations and 2025 sessions in Redis reached through Sentinel (a primary, a replica and
//! three sentinels). Under a bounded load of 2025 sessions and 2026-07-28 calls the primary is
//! killed; the test waits (by polling Sentinel, never by sleeping a fixed time) for the promotion
//! and for the old primary to rejoin as a replica, then requires every session to go on. Every
//! answer in between is counted: a success, a JSON-RPC error, or a 503 with `Retry-After`;
//! anything else (another status, a 503 without `Retry-After`, a dropped connection, a session
//! reported unknown) fails the test. The counts are printed.
//!
//! Needs `haproxy` (installed by `cargo xtask` like `redis-server`; skipped loudly without it, a
//! failure under `CI=true`) and `redis-server`/`redis-cli`.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{RedisSentinelSet, TempDir, legacy_headers};
use serde_json::{Value, json};
use support::{GatewayProcess, Reply, base_config, bearer, modern, send_body, users_json, workdir};
use tokio::process::{Child, Command};

const SEALING: &str = "failover-sealing-secret-failover-sealing-s";
const PATH: &str = "/servers/vh/mcp";
/// Sessions of 2025 clients, each driven by one task.
const SESSIONS: usize = 4;
/// Tasks sending 2026-07-28 calls.
const MODERN_CALLERS: usize = 2;
/// Pause between two requests of one task: the load is bounded, not a flood.
const PACE: Duration = Duration::from_millis(25);
/// Deadline of each phase (promotion, rejoin, recovery): seconds of margin on a loaded machine.
const PHASE: Duration = Duration::from_secs(90);

/// `haproxy` on PATH, or `None` after a loud message (a panic under `CI=true`).
#[allow(clippy::print_stderr)]
fn haproxy_bin() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .flat_map(|dir| [dir.join("haproxy")])
            .find(|c| c.is_file())
    });
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !ci,
            "haproxy not found; CI=true requires the failover test to run"
        );
        eprintln!(
            "\n*** SKIPPING FAILOVER TEST: haproxy not found (apt-get install haproxy) ***\n"
        );
    }
    found
}

/// The example's HAProxy configuration with its ports replaced by the test's.
fn haproxy_config(front: u16, nodes: [(SocketAddr, SocketAddr); 2]) -> String {
    let example = include_str!("../../../examples/two-nodes/haproxy.cfg");
    let [(n1, a1), (n2, a2)] = nodes;
    let config = example
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{front}"))
        .replace(
            "127.0.0.1:8081 check port 9091",
            &format!("{n1} check port {}", a1.port()),
        )
        .replace(
            "127.0.0.1:8082 check port 9092",
            &format!("{n2} check port {}", a2.port()),
        );
    assert!(
        !config.contains("8081") && !config.contains("9092"),
        "the example's server lines changed: update this test\n{config}"
    );
    config
}

async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    listener.local_addr().expect("addr").port()
}

struct Haproxy {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Haproxy {
    async fn start(bin: &std::path::Path, nodes: [(SocketAddr, SocketAddr); 2]) -> Self {
        let dir = workdir("failover-haproxy");
        let port = free_port().await;
        let cfg = dir.path().join("haproxy.cfg");
        std::fs::write(&cfg, haproxy_config(port, nodes)).expect("write haproxy.cfg");
        let check = std::process::Command::new(bin)
            .arg("-c")
            .arg("-f")
            .arg(&cfg)
            .output()
            .expect("haproxy -c");
        assert!(
            check.status.success(),
            "the example configuration is invalid: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(bin)
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn haproxy");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let deadline = tokio::time::Instant::now() + PHASE;
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "haproxy did not listen"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// What one answer was.
#[derive(Debug)]
enum Outcome {
    Ok,
    /// A JSON-RPC error object (HTTP 200 or 503 with `Retry-After`), by code.
    JsonRpcError(i64),
    /// 503 with `Retry-After`, no JSON-RPC body.
    Unavailable,
    /// Anything a client could not handle cleanly.
    Unclean(String),
}

fn classify(reply: &Reply) -> Outcome {
    let retry_after = reply.header("retry-after").is_some();
    let status = reply.status.as_u16();
    let error_code = reply
        .messages()
        .into_iter()
        .find_map(|m| m.get("error").and_then(|e| e["code"].as_i64()));
    match (status, retry_after, error_code) {
        (200, _, None) => Outcome::Ok,
        (200, _, Some(code)) => Outcome::JsonRpcError(code),
        (503, true, Some(code)) => Outcome::JsonRpcError(code),
        (503, true, None) => Outcome::Unavailable,
        _ => Outcome::Unclean(format!(
            "{status} (Retry-After: {retry_after}): {}",
            String::from_utf8_lossy(&reply.body)
        )),
    }
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    json_rpc_errors: Mutex<BTreeMap<i64, u64>>,
    unavailable: AtomicU64,
    unclean: Mutex<Vec<String>>,
}

impl Tally {
    fn record(&self, outcome: Outcome) {
        match outcome {
            Outcome::Ok => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::JsonRpcError(code) => {
                *self
                    .json_rpc_errors
                    .lock()
                    .expect("tally")
                    .entry(code)
                    .or_default() += 1;
            }
            Outcome::Unavailable => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Unclean(what) => self.unclean.lock().expect("tally").push(what),
        }
    }
}

async fn initialize(addr: SocketAddr) -> Reply {
    let auth = bearer("alice");
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "failover", "version": "1"}}});
    send_body(
        addr,
        "POST",
        PATH,
        &legacy_headers(Some(&auth), None),
        &body.to_string(),
    )
    .await
}

/// A 2025 session through `addr`, retried while the answer is a clean "try again".
async fn open_session(addr: SocketAddr) -> String {
    let deadline = tokio::time::Instant::now() + PHASE;
    loop {
        let reply = initialize(addr).await;
        if let (Outcome::Ok, Some(id)) = (classify(&reply), reply.header("mcp-session-id")) {
            let id = id.to_owned();
            let auth = bearer("alice");
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let ack = send_body(
                addr,
                "POST",
                PATH,
                &legacy_headers(Some(&auth), Some(&id)),
                &note.to_string(),
            )
            .await;
            assert_eq!(ack.status, 202, "{}", ack.text());
            return id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no session: {}",
            reply.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn echo_2025(addr: SocketAddr, session: &str, n: u64) -> Reply {
    let auth = bearer("alice");
    let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
        "params": {"name": "beta-echo", "arguments": {"text": format!("s{n}")}}});
    send_body(
        addr,
        "POST",
        PATH,
        &legacy_headers(Some(&auth), Some(session)),
        &body.to_string(),
    )
    .await
}

/// Waits until `done()` holds, polling; panics with `what` after [`PHASE`].
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PHASE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stderr)] // the counts are the report this test exists for
async fn two_nodes_behind_haproxy_ride_out_a_sentinel_failover() {
    let Some(haproxy_bin) = haproxy_bin() else {
        return;
    };
    let Some(mut set) = RedisSentinelSet::start().await else {
        return;
    };
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;

    // alice's configuration, stored the way operators do it.
    let users = users_json(&[("alice", "vh", &[(beta.name(), beta.url())])]);
    let alice: Value =
        serde_json::from_str::<Value>(&users).expect("json")["users"]["alice"].clone();
    set.cli(
        set.primary_port().await,
        &["SET", "mcpgw:user:alice", &alice.to_string()],
    )
    .await
    .expect("SET alice");

    let url = set.url();
    let config = base_config(&format!(
        "\n[router]\nsealing_secret_env = \"MCP_GATEWAY_SEALING_SECRET\"\n\n\
         [sessions]\nkind = \"redis\"\nurl = \"{url}\"\nwait_replicas = 1\nwait_timeout_ms = 2000\n"
    ));
    let env = [
        ("MCP_GATEWAY_SEALING_SECRET", SEALING),
        ("MCP_GATEWAY_CONFIG_STORE_KIND", "redis"),
        ("MCP_GATEWAY_CONFIG_STORE_URL", url.as_str()),
    ];
    let (dir1, dir2) = (workdir("failover-node1"), workdir("failover-node2"));
    let node1 = GatewayProcess::start(dir1.path(), &config, &env).await;
    let node2 = GatewayProcess::start(dir2.path(), &config, &env).await;
    let admin = |n: &GatewayProcess| n.admin.expect("admin listener");
    let proxy = Haproxy::start(
        &haproxy_bin,
        [(node1.addr, admin(&node1)), (node2.addr, admin(&node2))],
    )
    .await;
    let front = proxy.addr;

    // Both nodes in rotation before the load starts (HAProxy's checks hit /readyz).
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(open_session(front).await);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut progress = Vec::new();
    let mut tasks = Vec::new();
    for session in sessions.clone() {
        let (stop, tally, done) = (stop.clone(), tally.clone(), Arc::new(AtomicU64::new(0)));
        progress.push(done.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 1;
            while !stop.load(Ordering::Relaxed) {
                let outcome = classify(&echo_2025(front, &session, n).await);
                if matches!(outcome, Outcome::Ok) {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                tally.record(outcome);
                n += 1;
                tokio::time::sleep(PACE).await;
            }
        }));
    }
    for _ in 0..MODERN_CALLERS {
        let (stop, tally, done) = (stop.clone(), tally.clone(), Arc::new(AtomicU64::new(0)));
        progress.push(done.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let params = json!({"name": "beta-echo", "arguments": {"text": "modern"}});
                let reply = modern(front, "alice", "vh", "tools/call", params, &[]).await;
                let outcome = classify(&reply);
                if matches!(outcome, Outcome::Ok) {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                tally.record(outcome);
                tokio::time::sleep(PACE).await;
            }
        }));
    }
    let snapshot = |progress: &[Arc<AtomicU64>]| -> Vec<u64> {
        progress.iter().map(|p| p.load(Ordering::Relaxed)).collect()
    };
    let all_past = |progress: &[Arc<AtomicU64>], base: &[u64], more: u64| {
        progress
            .iter()
            .zip(base)
            .all(|(p, b)| p.load(Ordering::Relaxed) >= b + more)
    };
    until("the load to run", || {
        all_past(&progress, &vec![0; progress.len()], 3)
    })
    .await;
    let before_kill = tally.ok.load(Ordering::Relaxed);

    let old = set.kill_primary().await;
    let new = set.wait_for_promotion(old).await;
    set.restart_node(old).await;
    // Writes wait for a replica: wait until the old primary replicates from the new one.
    let deadline = tokio::time::Instant::now() + PHASE;
    loop {
        let info = set
            .cli(new, &["INFO", "replication"])
            .await
            .unwrap_or_default();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the old primary did not rejoin: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Every 2025 session and every modern caller goes on.
    let base = snapshot(&progress);
    until("every session to go on after the failover", || {
        all_past(&progress, &base, 3)
    })
    .await;
    // A new session can be created (its record confirmed by the rejoined replica).
    let fresh = open_session(front).await;
    assert!(classify(&echo_2025(front, &fresh, 1).await).is_ok());

    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await
            .expect("a load task panicked (a dropped connection?)");
    }
    let unclean = tally.unclean.lock().expect("tally").clone();
    let errors = tally.json_rpc_errors.lock().expect("tally").clone();
    eprintln!(
        "failover report: primary {old} -> {new}; {} ok ({} before the kill), {} 503 with Retry-After, JSON-RPC errors by code {:?}, {} unclean",
        tally.ok.load(Ordering::Relaxed),
        before_kill,
        tally.unavailable.load(Ordering::Relaxed),
        errors,
        unclean.len()
    );
    assert!(
        unclean.is_empty(),
        "answers a client could not handle cleanly during the failover:\n{}",
        unclean.join("\n")
    );
    drop((node1, node2));
}

impl Outcome {
    fn is_ok(&self) -> bool {
        matches!(self, Self::Ok)
    }
}
