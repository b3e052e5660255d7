//! stdio servers come from the operator (issue #17, item 2): free-form commands are refused at
//! load unless the operator trusts config authors; the older `stdio_allowed_commands` admits a
//! command but not the `args`/`env` that make it run any code; a catalog entry gives each
//! principal its own process unless it is shared; a user config sets only the `env` keys the
//! entry lists; the program is found with the gateway's PATH, never the config's.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{self, GatewayProcess, SECRET, base_config, modern, python_mcp1, workdir};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/py_stdio_server.py")
}

fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `{"users": {sub: {"virtual_hosts": {"vh": {"backends": backends}}}}}` for each entry.
fn users(entries: &[(&str, Value)]) -> String {
    let mut users = serde_json::Map::new();
    for (sub, backends) in entries {
        users.insert(
            (*sub).to_owned(),
            json!({"virtual_hosts": {"vh": {"backends": backends}}}),
        );
    }
    json!({ "users": users }).to_string()
}

/// `mcp-gateway check-config` on `gateway_toml` + `users_json`: (exit code, stderr).
fn check(name: &str, gateway_toml: &str, users_json: &str) -> (i32, String) {
    let dir = workdir(name);
    support::write(dir.path(), "users.json", users_json);
    let config = support::write(dir.path(), "gateway.toml", gateway_toml);
    let (code, _, err) = support::run_cli(
        &["check-config", "--config", text(&config)],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    (code, err)
}

const P: &str = "users.alice.virtual_hosts.vh.backends";

#[test]
fn a_free_form_command_is_refused_at_load_unless_the_operator_trusts_config_authors() {
    let doc = users(&[(
        "alice",
        json!({"tool": {"command": "node", "args": ["-e", "process.exit(0)"]}}),
    )]);
    let (code, err) = check("iso-stdio-free", &base_config(""), &doc);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "{P}.tool.command: free-form stdio commands are refused: define a [stdio_servers.NAME] entry"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("{P}.tool.args: ")), "{err}");

    // Control: the operator's explicit opt-in loads the same document.
    let trusted = base_config("\n[backends]\ntrust_user_commands = true\n");
    let (code, err) = check("iso-stdio-trusted", &trusted, &doc);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn allow_listed_commands_refuse_code_running_args_and_loader_variables() {
    let gateway = base_config("\n[backends]\nstdio_allowed_commands = [\"node\", \"python3\"]\n");
    let doc = users(&[(
        "alice",
        json!({
            "a": {"command": "node", "args": ["-e", "require('child_process').execSync('id')"]},
            "b": {"command": "python3", "args": ["-c", "import os"]},
            "c": {"command": "node", "env": {"NODE_OPTIONS": "--require /tmp/evil.js"}},
            "d": {"command": "python3", "env": {"LD_PRELOAD": "/tmp/evil.so"}},
            "e": {"command": "node", "env": {"PATH": "/tmp/evil"}},
            "f": {"command": "python3", "env": {"PYTHONSTARTUP": "/tmp/evil.py"}},
            "g": {"command": "node", "cwd": "/tmp"},
        }),
    )]);
    let (code, err) = check("iso-stdio-allowed", &gateway, &doc);
    assert_eq!(code, 2, "{err}");
    for field in [
        "a.args",
        "b.args",
        "c.env.NODE_OPTIONS",
        "d.env.LD_PRELOAD",
        "e.env.PATH",
        "f.env.PYTHONSTARTUP",
        "g.cwd",
    ] {
        assert!(err.contains(&format!("{P}.{field}: ")), "{field}: {err}");
    }
    assert!(
        err.contains("variables that change how programs load or run are refused"),
        "{err}"
    );

    // Control: the listed command alone, with an ordinary variable, still loads (with a warning
    // that points at the catalog).
    let doc = users(&[(
        "alice",
        json!({"a": {"command": "node", "env": {"API_KEY": "k"}}}),
    )]);
    let (code, err) = check("iso-stdio-allowed-ok", &gateway, &doc);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: ") && err.contains(&format!("{P}.a.command: ")),
        "{err}"
    );
}

#[test]
fn a_user_config_sets_only_the_env_keys_its_catalog_entry_lists() {
    let gateway = base_config(
        "\n[stdio_servers.memory]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]\nuser_env = [\"API_KEY\"]\n",
    );
    let refused = users(&[(
        "alice",
        json!({
            "m": {"stdio": "memory", "env": {"API_KEY": "k", "NODE_OPTIONS": "--require /x"}},
            "n": {"stdio": "nope"},
        }),
    )]);
    let (code, err) = check("iso-stdio-env", &gateway, &refused);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "{P}.m.env.NODE_OPTIONS: not settable for stdio server \"memory\" (the operator's [stdio_servers.memory] user_env lists: API_KEY)"
        )),
        "{err}"
    );
    assert!(!err.contains("m.env.API_KEY"), "{err}");
    assert!(
        err.contains(&format!(
            "{P}.n.stdio: no stdio server \"nope\" in the gateway's [stdio_servers] catalog"
        )),
        "{err}"
    );
    // What the entry fixes is refused by the document's own validation.
    let args = users(&[(
        "alice",
        json!({"o": {"stdio": "memory", "args": ["-e", "x"]}}),
    )]);
    let (code, err) = check("iso-stdio-args", &gateway, &args);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "{P}.o.args: set by the operator's stdio server entry; remove it"
        )),
        "{err}"
    );

    // Control: the listed key alone loads.
    let allowed = users(&[(
        "alice",
        json!({"m": {"stdio": "memory", "env": {"API_KEY": "k"}}}),
    )]);
    let (code, err) = check("iso-stdio-env-ok", &gateway, &allowed);
    assert_eq!(code, 0, "{err}");
}

/// The `pid` tool's answer for `sub`'s backend `backend`.
async fn pid(gw: &GatewayProcess, sub: &str, backend: &str) -> String {
    let reply = modern(
        gw.addr,
        sub,
        "vh",
        "tools/call",
        json!({"name": format!("{backend}-pid"), "arguments": {}}),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let last = reply.messages().pop().expect("a final message");
    last["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{sub} {backend}: no text result: {last}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_principals_get_two_processes_unless_the_catalog_entry_is_shared() {
    let Some(python) = python_mcp1() else { return };
    let entry = |name: &str, policy: &str| {
        format!(
            "\n[stdio_servers.{name}]\ncommand = {:?}\nargs = [{:?}]\npolicy = {policy:?}\nuser_env = [\"API_KEY\"]\n",
            text(&python),
            text(&script()),
        )
    };
    let gateway = base_config(&format!(
        "{}{}\n[backends]\ntrust_user_commands = true\n",
        entry("own", "per_principal"),
        entry("common", "shared"),
    ));
    let free_form =
        json!({"command": text(&python), "args": [text(&script())], "timeout_ms": 20000});
    let backends = json!({
        "own": {"stdio": "own", "timeout_ms": 20000},
        "common": {"stdio": "common", "timeout_ms": 20000},
        "keyed": {"stdio": "own", "env": {"API_KEY": "one"}, "timeout_ms": 20000},
        "free": free_form,
    });
    let dir = workdir("iso-stdio-processes");
    support::write(
        dir.path(),
        "users.json",
        &users(&[("alice", backends.clone()), ("bob", backends)]),
    );
    let gw = GatewayProcess::start(dir.path(), &gateway, &[]).await;

    // Per principal (the catalog's default): each principal its own process, kept across calls.
    let alice = pid(&gw, "alice", "own").await;
    let bob = pid(&gw, "bob", "own").await;
    assert_ne!(alice, bob, "one process for two principals");
    assert_eq!(
        pid(&gw, "alice", "own").await,
        alice,
        "alice's process kept"
    );

    // The user-set env value is part of the key: same entry, same principal, other value.
    assert_ne!(pid(&gw, "alice", "keyed").await, alice);

    // A free-form command without stdio_policy is per principal too, even when trusted.
    assert_ne!(
        pid(&gw, "alice", "free").await,
        pid(&gw, "bob", "free").await
    );

    // Control: the operator's shared entry gives both principals one process.
    assert_eq!(
        pid(&gw, "alice", "common").await,
        pid(&gw, "bob", "common").await,
        "a shared entry is one process"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_program_is_found_with_the_gateways_path_not_the_configs() {
    let Some(python) = python_mcp1() else { return };
    let dir = workdir("iso-stdio-path");
    // A `python` on the configuration's PATH that would leave a mark if it ever ran.
    let evil = dir.path().join("evil");
    std::fs::create_dir_all(&evil).expect("evil dir");
    let mark = dir.path().join("evil-ran");
    let fake = support::write(
        &evil,
        "python",
        &format!("#!/bin/sh\ntouch {:?}\nexit 1\n", text(&mark)),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let venv_bin = python.parent().expect("venv bin");
    let gateway_path = format!(
        "{}:{}",
        text(venv_bin),
        std::env::var("PATH").unwrap_or_default()
    );
    let gateway = base_config("\n[backends]\ntrust_user_commands = true\n");
    support::write(
        dir.path(),
        "users.json",
        &users(&[(
            "alice",
            json!({"py": {
                "command": "python",
                "args": [text(&script())],
                "env": {"PATH": text(&evil)},
                "timeout_ms": 20000
            }}),
        )]),
    );
    let gw = GatewayProcess::start(dir.path(), &gateway, &[("PATH", &gateway_path)]).await;
    let reply = modern(
        gw.addr,
        "alice",
        "vh",
        "tools/call",
        json!({"name": "py-echo", "arguments": {"text": "x"}}),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let last = reply.messages().pop().expect("a final message");
    assert_eq!(last["result"]["content"][0]["text"], "py: x", "{last}");
    assert!(
        !mark.exists(),
        "the configuration's PATH picked the program"
    );
}
