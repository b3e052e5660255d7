//! The operator contract of the binary (book: docs/src/gateway.md): `check-config` (exit codes, messages naming
//! the file and key, unsupported features), `token` (accepted by the same gateway; another
//! secret's token rejected), `--print-config` (precedence, redaction), `config-keys` and
//! `metric-table` (the book's key and metric tables are their output), serve refusing a broken configuration before binding and exiting 1
//! on a port in use (on either runtime).

mod support;

use serde_json::json;
use support::{
    GatewayProcess, SECRET, base_config, modern, run_cli, send_body, users_json, workdir, write,
};

fn alice_users() -> String {
    users_json(&[(
        "alice",
        "vh1",
        &[("alpha", "http://127.0.0.1:9/mcp".to_owned())],
    )])
}

#[test]
fn check_config_accepts_a_valid_configuration() {
    let dir = workdir("cli-ok");
    write(dir.path(), "users.json", &alice_users());
    let config = write(dir.path(), "gateway.toml", &base_config(""));
    let config = config.to_str().expect("utf-8 path");
    let (code, out, err) = run_cli(
        &["check-config", "--config", config],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("configuration OK"), "{out}");
    assert!(
        out.contains("1 user configuration(s) checked in the file store"),
        "{out}"
    );
}

#[test]
fn check_config_names_the_file_and_key_of_process_config_errors() {
    let dir = workdir("cli-bad-process");
    write(dir.path(), "users.json", &alice_users());
    let path = write(
        dir.path(),
        "gateway.toml",
        &base_config("\n[limits]\nmax_conections = 5\nmax_body_bytes = \"big\"\n"),
    );
    let config = path.to_str().expect("utf-8 path");
    let (code, out, err) = run_cli(
        &["check-config", "--config", config],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains(&format!(
            "{config}: limits.max_conections: unknown key (keys of [limits]: max_body_bytes"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{config}: limits.max_body_bytes: expected a non-negative integer, found the string \"big\""
        )),
        "{err}"
    );

    // An environment override is named as such.
    write(dir.path(), "gateway.toml", &base_config(""));
    let (code, _, err) = run_cli(
        &["check-config", "--config", config],
        &[
            ("MCP_GATEWAY_JWT_SECRET", SECRET),
            ("MCP_GATEWAY_LISTEN_ADDR", "not-an-address"),
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("environment variable MCP_GATEWAY_LISTEN_ADDR: listen.addr: `not-an-address` is not a socket address"),
        "{err}"
    );

    // No verification key at all.
    let (code, _, err) = run_cli(&["check-config", "--config", config], &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "auth.jwt.hs256_secret_env: the environment variable MCP_GATEWAY_JWT_SECRET is not set"
        ),
        "{err}"
    );
}

#[test]
fn check_config_names_the_path_of_user_config_errors() {
    let dir = workdir("cli-bad-users");
    let users = write(
        dir.path(),
        "users.json",
        r#"{"users":{"alice":{"virtual_hosts":{"vh1":{"backends":{"weather":{"url":"weather"}}}}}}}"#,
    );
    let config = write(dir.path(), "gateway.toml", &base_config(""));
    let (code, out, err) = run_cli(
        &["check-config", "--config", config.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains(&format!(
            "{}: users.alice.virtual_hosts.vh1.backends.weather.url: relative URL without a base",
            users.display()
        )),
        "{err}"
    );

    // Overlapping backend names: a warning when serving, an error for check-config.
    write(
        dir.path(),
        "users.json",
        &users_json(&[(
            "alice",
            "vh1",
            &[
                ("a", "http://127.0.0.1:9/mcp".to_owned()),
                ("a-b", "http://127.0.0.1:9/mcp".to_owned()),
            ],
        )]),
    );
    let (code, _, err) = run_cli(
        &["check-config", "--config", config.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("users.alice.virtual_hosts.vh1.backends"),
        "{err}"
    );
    assert!(err.contains("an error for check-config"), "{err}");

    // A stdio backend whose command the operator did not allow.
    write(
        dir.path(),
        "users.json",
        r#"{"users":{"alice":{"virtual_hosts":{"vh1":{"backends":{"tool":{"command":"npx"}}}}}}}"#,
    );
    let (code, _, err) = run_cli(
        &["check-config", "--config", config.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("users.alice.virtual_hosts.vh1.backends.tool.command: free-form stdio commands are refused"),
        "{err}"
    );
}

#[test]
fn unsupported_features_and_incomplete_session_stores_are_rejected_with_their_message() {
    let dir = workdir("cli-unsupported");
    write(dir.path(), "users.json", &alice_users());
    let cases = [
        (
            "\n[sessions]\nkind = \"redis\"\n",
            vec![
                "sessions.url: must be a redis:// (or rediss://, redis+sentinel://, redis+cluster://) URL when sessions.kind = \"redis\": not a URL (scheme:// missing)",
            ],
        ),
        (
            "\n[sessions]\nkind = \"sealed\"\n",
            vec![
                "sessions.keys_env: must name the environment variable holding the key ring when sessions.kind = \"sealed\"",
            ],
        ),
        (
            "\n[sessions]\nkind = \"sealed\"\nkeys_env = \"MCP_GATEWAY_TEST_NO_SUCH_VAR\"\n",
            vec![
                "sessions.keys_env: the environment variable MCP_GATEWAY_TEST_NO_SUCH_VAR is not set",
            ],
        ),
        (
            "\n[sessions]\nkind = \"sealed\"\nkeys_env = \"MCP_GATEWAY_TEST_NO_SUCH_VAR\"\nurl = \"http://bus\"\n",
            vec![
                "sessions.keys_env: the environment variable MCP_GATEWAY_TEST_NO_SUCH_VAR is not set",
                "sessions.url: must be a redis:// (or rediss://, redis+sentinel://, redis+cluster://) URL (the node bus) when set with sessions.kind = \"sealed\": unsupported scheme `http`",
            ],
        ),
        (
            "\n[sessions]\nkind = \"shared\"\n",
            vec!["sessions.kind: unknown kind `shared` (\"local\", \"redis\" or \"sealed\")"],
        ),
        (
            "\n[plugins]\nreload_interval_ms = 0\n",
            vec!["plugins.reload_interval_ms: must be at least 1"],
        ),
        (
            "\n[plugins]\nconfig = \"p.toml\"\nredis_key = \"k\"\n",
            vec![
                "plugins.config: set either plugins.config or plugins.redis_url + plugins.redis_key, not both",
            ],
        ),
        (
            "\n[telemetry.audit]\ntarget = \"otlp\"\n",
            vec![
                "telemetry.audit.target: \"otlp\": this build has no OTLP logs exporter (\"off\", \"stdout\" or \"file\")",
            ],
        ),
        (
            "\n[telemetry.audit]\ntarget = \"file\"\n",
            vec![
                "telemetry.audit.target: \"file\" needs telemetry.audit.path (the file records are appended to)",
            ],
        ),
        (
            "\n[plugins]\nredis_url = \"http://x\"\nredis_key = \"k\"\n",
            vec![
                "plugins.redis_url: must be a redis:// (or rediss://, redis+sentinel://, redis+cluster://) URL: unsupported scheme `http`",
            ],
        ),
    ];
    for (extra, needles) in cases {
        let config = write(dir.path(), "gateway.toml", &base_config(extra));
        let config = config.to_str().expect("path");
        for command in ["check-config", "serve"] {
            let (code, _, err) = run_cli(
                &[command, "--config", config],
                &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
            );
            assert_eq!(code, 2, "{command} {extra}: {err}");
            for needle in &needles {
                assert!(
                    err.contains(needle),
                    "{command}: missing {needle:?} in\n{err}"
                );
            }
            assert!(!err.contains("listening"), "refused before binding: {err}");
        }
    }
}

/// A watch that would read the file in a busy loop is refused; an audit file that cannot be
/// opened stops `serve` before it binds, naming the key.
#[test]
fn a_too_eager_config_watch_and_an_unopenable_audit_file_are_refused() {
    let dir = workdir("cli-watch-audit");
    write(dir.path(), "users.json", &alice_users());
    let config = write(dir.path(), "gateway.toml", &base_config(""));
    let config = config.to_str().expect("path");
    for command in ["check-config", "serve"] {
        let (code, _, err) = run_cli(
            &[command, "--config", config],
            &[
                ("MCP_GATEWAY_JWT_SECRET", SECRET),
                ("MCP_GATEWAY_CONFIG_WATCH_MS", "50"),
            ],
        );
        assert_eq!(code, 2, "{command}: {err}");
        assert!(
            err.contains("config_watch_ms: must be 0 (no watch) or at least 100"),
            "{command}: {err}"
        );
    }
    let unopenable = dir.path().join("no-such-dir").join("audit.jsonl");
    let config = write(
        dir.path(),
        "gateway.toml",
        &base_config(&format!(
            "\n[telemetry.audit]\ntarget = \"file\"\npath = \"{}\"\n",
            unopenable.display()
        )),
    );
    let (code, _, err) = run_cli(
        &["serve", "--config", config.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("telemetry.audit.path: cannot open") && err.contains("for appending"),
        "{err}"
    );
    assert!(!err.contains("listening"), "refused before binding: {err}");
}

#[test]
fn breaker_defaults_are_validated() {
    let dir = workdir("cli-breaker");
    write(dir.path(), "users.json", &alice_users());
    let config = write(
        dir.path(),
        "gateway.toml",
        &base_config(
            "\n[breaker]\nconsecutive_failures = 3\nopen_ms = 2000\nhalf_open_probes = 2\n",
        ),
    );
    let config = config.to_str().expect("path");
    let (code, out, err) = run_cli(
        &["check-config", "--config", config],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = run_cli(
        &[
            "check-config",
            "--config",
            config,
            "--set",
            "breaker.half_open_probes=0",
        ],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("command line --set breaker.half_open_probes: breaker.half_open_probes: "),
        "{err}"
    );
}

#[test]
fn print_config_shows_precedence_and_redacts_secrets() {
    let dir = workdir("cli-print");
    let config = write(
        dir.path(),
        "gateway.toml",
        "[listen]\naddr = \"127.0.0.1:7000\"\nadmin_addr = \"127.0.0.1:7001\"\n[config_store]\nkind = \"redis\"\nurl = \"redis://user:hunter2@127.0.0.1:6379/0\"\n",
    );
    let config = config.to_str().expect("path");
    let (code, out, err) = run_cli(
        &[
            "--config",
            config,
            "--print-config",
            "--listen",
            "127.0.0.1:7100",
            "--set",
            "limits.max_connections=7",
        ],
        &[
            ("MCP_GATEWAY_LISTEN_ADDR", "127.0.0.1:7200"),
            ("MCP_GATEWAY_LISTEN_ADMIN_ADDR", "127.0.0.1:7201"),
            ("MCP_GATEWAY_JWT_SECRET", SECRET),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("addr = \"127.0.0.1:7100\"  # command line --listen"),
        "{out}"
    );
    assert!(
        out.contains(
            "admin_addr = \"127.0.0.1:7201\"  # environment variable MCP_GATEWAY_LISTEN_ADMIN_ADDR"
        ),
        "{out}"
    );
    assert!(
        out.contains("max_connections = 7  # command line --set limits.max_connections"),
        "{out}"
    );
    assert!(
        out.contains(&format!("kind = \"redis\"  # {config}")),
        "{out}"
    );
    assert!(
        out.contains("url = \"redis://user:REDACTED@127.0.0.1:6379/0\""),
        "{out}"
    );
    assert!(!out.contains("hunter2"), "{out}");
    assert!(!out.contains(SECRET), "{out}");
    assert!(out.contains("leeway_s = 30  # default"), "{out}");
}

/// What stands between a chapter's `<!-- {marker}:start -->` and `<!-- {marker}:end -->`: the
/// table xtask generates there.
fn generated(chapter: &str, marker: &str) -> String {
    let path = format!("{}/../../docs/src/{chapter}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect(chapter);
    text.split_once(&format!("<!-- {marker}:start -->\n"))
        .and_then(|(_, rest)| rest.split_once(&format!("<!-- {marker}:end -->")))
        .map(|(table, _)| table.to_owned())
        .unwrap_or_else(|| panic!("the {marker} markers in docs/src/{chapter}"))
}

#[test]
fn config_keys_is_the_books_reference() {
    let (code, out, _) = run_cli(&["config-keys"], &[]);
    assert_eq!(code, 0);
    for spec in mcp_gateway::config::KEYS {
        assert!(out.contains(&format!("| `{}` |", spec.key)), "{}", spec.key);
        assert!(out.contains(&spec.env_name()), "{}", spec.key);
    }
    assert!(
        generated("configuration.md", "config-keys") == out,
        "docs/src/configuration.md has drifted from `mcp-gateway config-keys`: run `cargo xtask config-reference`"
    );
}

#[test]
fn metric_table_is_the_books_table() {
    let (code, out, _) = run_cli(&["metric-table"], &[]);
    assert_eq!(code, 0);
    assert_eq!(out, mcp_gateway::metric_table());
    assert!(
        generated("telemetry.md", "metric-table") == out,
        "docs/src/telemetry.md has drifted from `mcp-gateway metric-table`: run `cargo xtask metrics-reference`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_command_mints_what_the_gateway_accepts() {
    let dir = workdir("cli-token");
    write(dir.path(), "users.json", &alice_users());
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    let config = dir.path().join("gateway.toml");
    let config = config.to_str().expect("path");

    let (code, token, err) = run_cli(
        &["token", "--config", config, "--sub", "alice", "--ttl", "1h"],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{err}");
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "{token}");
    // Accepted: the request gets past authentication and reaches the virtual host layer.
    let auth = format!("Bearer {token}");
    send_body(
        gw.addr,
        "POST",
        "/servers/nope/mcp",
        &[("authorization", &auth)],
        "{}",
    )
    .await
    .assert_detail(404, "Server not found");
    // Reaches the router for a configured virtual host (the backend is down: a JSON-RPC answer).
    let reply = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.text());

    // The same command with another secret: rejected by the gateway.
    let (code, other, _) = run_cli(
        &["token", "--config", config, "--sub", "alice"],
        &[(
            "MCP_GATEWAY_JWT_SECRET",
            "a-completely-different-secret-value!",
        )],
    );
    assert_eq!(code, 0);
    let auth = format!("Bearer {}", other.trim());
    send_body(
        gw.addr,
        "POST",
        "/servers/vh1/mcp",
        &[("authorization", &auth)],
        "{}",
    )
    .await
    .assert_detail(401, "Invalid token signature");

    // Expired tokens cannot be minted, and there is no token without a secret.
    let (code, _, err) = run_cli(
        &["token", "--config", config, "--sub", "alice", "--ttl", "0s"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run_cli(&["token", "--config", config, "--sub", "alice"], &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("the environment variable MCP_GATEWAY_JWT_SECRET is not set"),
        "{err}"
    );
}

#[test]
fn serve_refuses_a_broken_user_file_before_binding() {
    let dir = workdir("cli-serve-broken");
    write(dir.path(), "users.json", "{ not json");
    let config = write(dir.path(), "gateway.toml", &base_config(""));
    let (code, _, err) = run_cli(
        &["serve", "--config", config.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("users.json"), "{err}");
    assert!(!err.contains("\"listening\""), "{err}");
}

#[test]
fn shared_session_stores_are_accepted_when_complete() {
    let dir = workdir("cli-sessions");
    write(dir.path(), "users.json", &alice_users());
    let keys = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    for (extra, env) in [
        (
            "\n[sessions]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n",
            vec![],
        ),
        (
            "\n[sessions]\nkind = \"sealed\"\nkeys_env = \"MCP_GATEWAY_TEST_SESSION_KEYS\"\n",
            vec![("MCP_GATEWAY_TEST_SESSION_KEYS", keys)],
        ),
    ] {
        let config = write(dir.path(), "gateway.toml", &base_config(extra));
        let mut env_all = vec![("MCP_GATEWAY_JWT_SECRET", SECRET)];
        env_all.extend(env);
        let (code, _, err) = run_cli(
            &["check-config", "--config", config.to_str().expect("path")],
            &env_all,
        );
        assert_eq!(code, 0, "{extra}: {err}");
    }
    // A malformed key ring is named with its variable.
    let config = write(
        dir.path(),
        "gateway.toml",
        &base_config(
            "\n[sessions]\nkind = \"sealed\"\nkeys_env = \"MCP_GATEWAY_TEST_SESSION_KEYS\"\n",
        ),
    );
    let (code, _, err) = run_cli(
        &["check-config", "--config", config.to_str().expect("path")],
        &[
            ("MCP_GATEWAY_JWT_SECRET", SECRET),
            ("MCP_GATEWAY_TEST_SESSION_KEYS", "k1:short"),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "sessions.keys_env: the key ring in $MCP_GATEWAY_TEST_SESSION_KEYS is invalid"
        ),
        "{err}"
    );
}

/// A port another socket listens on: `serve` exits 1 naming the listener, the address and the
/// reason, on either runtime. With `thread-per-core` the other socket has set `SO_REUSEPORT`
/// itself, the case where the gateway's own `SO_REUSEPORT` sockets could otherwise join it and
/// take a share of its clients.
#[test]
fn serve_exits_1_on_a_port_in_use_in_both_runtime_modes() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let _entered = runtime.enter();
    for mode in ["work-stealing", "thread-per-core"] {
        let holder = tokio::net::TcpSocket::new_v4().expect("socket");
        holder.set_reuseport(true).expect("SO_REUSEPORT");
        holder
            .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind");
        let holder = holder.listen(16).expect("listen");
        let taken = holder.local_addr().expect("addr");
        let dir = workdir("cli-port-in-use");
        write(dir.path(), "users.json", &alice_users());
        let config = base_config(&format!("\n[runtime]\nmode = \"{mode}\"\nthreads = 2\n"))
            .replace(
                "addr = \"127.0.0.1:0\"\nadmin_addr",
                &format!("addr = \"{taken}\"\nadmin_addr"),
            );
        let config = write(dir.path(), "gateway.toml", &config);
        let (code, _, err) = run_cli(
            &["serve", "--config", config.to_str().expect("path")],
            &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
        );
        assert_eq!(code, 1, "{mode}: {err}");
        assert!(
            err.contains(&format!("mcp-gateway: cannot listen on {taken} (mcp): ")),
            "{mode}: {err}"
        );
        assert!(err.contains("in use"), "{mode}: {err}");
        assert!(!err.contains("\"listening\""), "{mode}: {err}");
    }
}
