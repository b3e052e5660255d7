//! The systemd unit (`deploy/systemd/`) stays true to the binary (book: docs/src/deploying.md,
//! "systemd"):
//!
//! - its hardening is there (a setting dropped by an edit fails here, not in production);
//! - every `Exec*` line runs `/usr/local/bin/mcp-gateway` with subcommands and flags the binary
//!   has (its `--help`), on the configuration under `ConfigurationDirectory=`; `check-config` as
//!   `ExecStartPre` runs it passes on `deploy/systemd/gateway.toml` with `env.example`'s values;
//!   `serve` as `ExecStart` runs it starts, survives `ExecReload` (SIGHUP) and stops cleanly on
//!   `KillSignal` within `TimeoutStopSec`;
//! - `TimeoutStopSec` outlasts `shutdown_drain_s` and the 3 s after it, `LimitNOFILE` is at
//!   least twice `limits.max_connections`;
//! - every variable of `env.example` is one the gateway reads (a key's, or one gateway.toml
//!   names), every variable gateway.toml names is set there, and each is in the book's section;
//! - the binary runs under the kernel's `PR_SET_MDWE`, what `MemoryDenyWriteExecute=yes`
//!   enforces (skips loudly without python3 or before Linux 6.3);
//! - `systemd-analyze verify` accepts the unit (Debian's `systemd` package; `cargo xtask test`
//!   installs it when missing): without it that part skips loudly, and fails under `CI=true`.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{GatewayProcess, admin_get, bin, poll_until, run_cli, workdir, write};

/// Where the unit expects the binary.
const BIN: &str = "/usr/local/bin/mcp-gateway";

/// After the drain (`shutdown_drain_s`) the gateway gives the messages closed calls owe their
/// backends up to 3 s more (book: docs/src/gateway.md, "Shutdown").
const OWED_GRACE_S: u64 = 3;

fn systemd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The unit's settings: `(section, key, value)` in file order. Comments and blank lines are
/// skipped; continuation lines are refused (none are needed, and this reader would miss them).
fn unit_settings(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut settings = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        assert!(!line.ends_with('\\'), "a continuation line: {line}");
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            name.clone_into(&mut section);
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a setting: {line}"));
        settings.push((
            section.clone(),
            key.trim().to_owned(),
            value.trim().to_owned(),
        ));
    }
    settings
}

/// The one value of `[Service]` `key`.
fn service(settings: &[(String, String, String)], key: &str) -> String {
    let values: Vec<&str> = settings
        .iter()
        .filter(|(s, k, _)| s == "Service" && k == key)
        .map(|(_, _, v)| v.as_str())
        .collect();
    assert_eq!(values.len(), 1, "one {key}= in [Service]: {values:?}");
    values[0].to_owned()
}

/// A command line of an `Exec*` setting: its special prefixes (`-`, `@`, `:`, `+`, `!`) dropped,
/// split on whitespace (the unit quotes nothing).
fn argv(value: &str) -> Vec<String> {
    let command = value.trim_start_matches(['-', '@', ':', '+', '!']);
    assert!(
        !command.contains(['"', '\'']),
        "quoting in {value}: split it by hand"
    );
    command.split_whitespace().map(str::to_owned).collect()
}

/// The subcommands `mcp-gateway --help` lists, and the long flags `mcp-gateway <sub> --help`
/// lists.
fn subcommands() -> BTreeSet<String> {
    let (code, out, err) = run_cli(&["--help"], &[]);
    assert_eq!(code, 0, "--help: {err}");
    out.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

fn flags(subcommand: &str) -> BTreeSet<String> {
    let (code, out, err) = run_cli(&[subcommand, "--help"], &[]);
    assert_eq!(code, 0, "{subcommand} --help: {err}");
    out.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.split(['=', '[', '<']).next().unwrap_or(w).to_owned())
        .collect()
}

/// The environment variables of env.example: `(name, value)` of the lines that set one, and the
/// names of the commented-out examples (`# NAME=value`).
fn env_example() -> (Vec<(String, String)>, Vec<String>) {
    let text = read(&systemd_dir().join("env.example"));
    let is_name = |name: &str| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    let mut set = Vec::new();
    let mut commented = Vec::new();
    for line in text.lines() {
        if let Some(example) = line.strip_prefix("# ") {
            if let Some((name, _)) = example.split_once('=')
                && is_name(name)
            {
                commented.push(name.to_owned());
            }
        } else if let Some((name, value)) = line.split_once('=') {
            assert!(is_name(name), "env.example: not NAME=value: {line}");
            set.push((name.to_owned(), value.to_owned()));
        }
    }
    (set, commented)
}

/// Every key's environment variable, from `mcp-gateway config-keys` (its Markdown table: key,
/// type, default, environment variable, description).
fn config_key_env_names() -> BTreeSet<String> {
    let (code, out, err) = run_cli(&["config-keys"], &[]);
    assert_eq!(code, 0, "config-keys failed: {err}");
    let names: BTreeSet<String> = out
        .lines()
        .skip(2)
        .filter_map(|row| row.split(" | ").nth(3))
        .map(|cell| cell.trim().trim_matches('`').to_owned())
        .collect();
    assert!(names.contains("MCP_GATEWAY_LISTEN_ADDR"), "{out}");
    names
}

/// The variables `*_env` keys of gateway.toml's text name, set or commented out.
fn named_env(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start_matches(['#', ' ']);
            let (key, value) = line.split_once('=')?;
            let name = value.trim().strip_prefix('"')?.split('"').next()?;
            (key.trim().ends_with("_env") && !name.is_empty()).then(|| name.to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_unit_matches_the_binary() {
    let unit_text = read(&systemd_dir().join("mcp-gateway.service"));
    let unit = unit_settings(&unit_text);
    let gateway_toml = read(&systemd_dir().join("gateway.toml"));
    let config = mcp_gateway::config::GatewayConfig::from_toml_str(&gateway_toml)
        .unwrap_or_else(|e| panic!("deploy/systemd/gateway.toml: {e}"));

    // The hardening the book describes.
    for (key, value) in [
        ("DynamicUser", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
        ("SystemCallFilter", "@system-service"),
        ("MemoryDenyWriteExecute", "yes"),
        ("LockPersonality", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectKernelLogs", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictNamespaces", "yes"),
        ("RestrictRealtime", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("ConfigurationDirectory", "mcp-gateway"),
        ("StateDirectory", "mcp-gateway"),
        ("EnvironmentFile", "-/etc/mcp-gateway/env"),
        ("KillSignal", "SIGTERM"),
        ("Restart", "on-failure"),
    ] {
        assert_eq!(service(&unit, key), value, "{key}=");
    }

    // The Exec lines: the binary's subcommands and flags, on the configuration directory's file.
    let config_path = format!(
        "/etc/{}/gateway.toml",
        service(&unit, "ConfigurationDirectory")
    );
    let commands = subcommands();
    for key in ["ExecStartPre", "ExecStart"] {
        let args = argv(&service(&unit, key));
        assert_eq!(args[0], BIN, "{key} runs the installed binary");
        let subcommand = &args[1];
        assert!(
            commands.contains(subcommand),
            "{key}: {subcommand} is not a subcommand of {commands:?}"
        );
        let known = flags(subcommand);
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                known.contains(flag),
                "{key}: {subcommand} has no {flag}: {known:?}"
            );
        }
        let at = args.iter().position(|a| a == "--config");
        assert_eq!(
            at.and_then(|i| args.get(i + 1)),
            Some(&config_path),
            "{key} reads {config_path}"
        );
    }
    assert_eq!(
        argv(&service(&unit, "ExecStartPre"))[1..],
        ["check-config", "--config", &config_path]
    );
    // The form the process helper runs (`serve --config <path>`), below.
    assert_eq!(
        argv(&service(&unit, "ExecStart"))[1..],
        ["serve", "--config", &config_path]
    );
    let reload = argv(&service(&unit, "ExecReload"));
    assert_eq!(
        reload,
        ["/bin/kill", "-HUP", "$MAINPID"],
        "reload is SIGHUP"
    );

    // Stopping outlasts the drain; open files cover twice the connections.
    let stop = service(&unit, "TimeoutStopSec");
    let stop: u64 = stop
        .strip_suffix('s')
        .unwrap_or(&stop)
        .parse()
        .expect("TimeoutStopSec in seconds");
    let drain = config.shutdown_drain.as_secs();
    assert!(
        stop > drain + OWED_GRACE_S,
        "TimeoutStopSec {stop} must outlast shutdown_drain_s ({drain} s) and the {OWED_GRACE_S} s after it"
    );
    let default_drain = mcp_gateway::config::GatewayConfig::default()
        .shutdown_drain
        .as_secs();
    assert!(stop > default_drain + OWED_GRACE_S, "and the default drain");
    let nofile: u64 = service(&unit, "LimitNOFILE")
        .parse()
        .expect("LimitNOFILE a number");
    let connections = u64::try_from(config.limits.max_connections).expect("fits");
    assert!(
        nofile >= 2 * connections,
        "LimitNOFILE {nofile} below twice limits.max_connections ({connections}): the binary warns"
    );

    // env.example: variables the gateway reads, every one gateway.toml names, all in the book.
    let (set, commented) = env_example();
    let keys = config_key_env_names();
    let named = named_env(&gateway_toml);
    let book = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/deploying.md"));
    let systemd_section = book
        .split("\n## systemd\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the book's systemd section");
    for name in set.iter().map(|(n, _)| n).chain(&commented) {
        assert!(
            keys.contains(name) || named.contains(name),
            "env.example: {name} is neither a key's variable (config-keys) nor named by gateway.toml ({named:?})"
        );
        assert!(
            systemd_section.contains(name.as_str()),
            "env.example's {name} is not in the book's systemd section"
        );
    }
    let mut active = BTreeSet::new();
    let table: toml::Table = toml::from_str(&gateway_toml).expect("TOML");
    active_env(&table, &mut active);
    for name in &active {
        assert!(
            set.iter().any(|(n, _)| n == name),
            "gateway.toml names {name}, which env.example does not set"
        );
    }

    // ExecStartPre, as the unit runs it, on gateway.toml with env.example's values (users.json
    // beside it, as installed).
    let dir = workdir("systemd-unit");
    let path = write(dir.path(), "gateway.toml", &gateway_toml);
    write(dir.path(), "users.json", r#"{"users": {}}"#);
    let path = path.to_str().expect("path");
    let env: Vec<(&str, &str)> = set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let pre: Vec<String> = argv(&service(&unit, "ExecStartPre"))[1..]
        .iter()
        .map(|a| {
            if *a == config_path {
                path.to_owned()
            } else {
                a.clone()
            }
        })
        .collect();
    let pre: Vec<&str> = pre.iter().map(String::as_str).collect();
    let (code, out, err) = run_cli(&pre, &env);
    assert_eq!(code, 0, "ExecStartPre {pre:?}:\n{out}{err}");
    assert!(out.contains("configuration OK"), "{out}");
    assert!(err.trim().is_empty(), "check-config warned:\n{err}");

    // ExecStart, then ExecReload and the stop: the listeners on free loopback ports.
    let mut env = env;
    env.extend([
        ("MCP_GATEWAY_LISTEN_ADDR", "127.0.0.1:0"),
        ("MCP_GATEWAY_LISTEN_ADMIN_ADDR", "127.0.0.1:0"),
    ]);
    let mut gw = GatewayProcess::start(dir.path(), &gateway_toml, &env).await;
    assert_eq!(admin_get(&gw, "/healthz").await.status, 200);
    let pid = gw.pid().to_string();
    let reload: Vec<String> = reload.iter().map(|a| a.replace("$MAINPID", &pid)).collect();
    let status = std::process::Command::new(&reload[0])
        .args(&reload[1..])
        .status()
        .expect("run ExecReload");
    assert!(status.success(), "{reload:?}");
    // The reload's own log line, not a fixed wait: it says the signal was taken.
    assert!(
        poll_until(Duration::from_secs(30), || async {
            gw.logs().contains("configuration reloaded")
        })
        .await,
        "ExecReload reloaded nothing:\n{}",
        gw.logs()
    );
    assert_eq!(
        admin_get(&gw, "/healthz").await.status,
        200,
        "the gateway serves after ExecReload:\n{}",
        gw.logs()
    );
    gw.sigterm(); // KillSignal=SIGTERM
    let exit = gw.wait(Duration::from_secs(stop)).await;
    assert!(exit.success(), "{exit}:\n{}", gw.logs());

    verify(&unit_text);
}

/// The variables the `*_env` keys of a TOML table name (set, not commented), at any depth.
fn active_env(table: &toml::Table, out: &mut BTreeSet<String>) {
    for (key, value) in table {
        match value {
            toml::Value::Table(inner) => active_env(inner, out),
            toml::Value::String(name) if key.ends_with("_env") && !name.is_empty() => {
                out.insert(name.clone());
            }
            _ => {}
        }
    }
}

/// `systemd-analyze verify` on the unit, the binary's path pointed at the one under test (verify
/// checks that each command is executable). Skips loudly without systemd-analyze (a failure
/// under `CI=true`).
#[allow(clippy::print_stderr)]
fn verify(unit_text: &str) {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("systemd-analyze"))
            .find(|c| c.is_file())
    });
    let Some(analyze) = found else {
        assert!(
            !mcp_test_support::peers::in_ci(),
            "systemd-analyze not found; CI=true requires the unit to be verified \
             (apt-get install systemd; `cargo xtask test` installs it)"
        );
        eprintln!(
            "\n*** SKIPPING systemd-analyze verify: not found (apt-get install systemd) ***\n"
        );
        return;
    };
    let dir = workdir("systemd-verify");
    let unit = write(
        dir.path(),
        "mcp-gateway.service",
        &unit_text.replace(BIN, bin()),
    );
    let out = std::process::Command::new(analyze)
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("run systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Its complaints about this unit name the file (an unknown key, a value it cannot parse);
    // anything else is about the machine's own units.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("mcp-gateway.service"))
        .collect();
    assert!(
        out.status.success() && ours.is_empty(),
        "systemd-analyze verify:\n{}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A python3 program that sets the kernel's `PR_SET_MDWE` (`PR_MDWE_REFUSE_EXEC_GAIN`) on itself, then becomes the
/// program of its arguments; exit 77 when the kernel does not have it (before Linux 6.3).
const NO_WRITE_EXECUTE: &str = "
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:
    sys.exit(77)
os.execv(sys.argv[1], sys.argv[1:])
";

/// Runs `program args` under [`NO_WRITE_EXECUTE`]: `(exit code, stdout, stderr)`.
fn without_write_execute(
    python: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let out = std::process::Command::new(python)
        .args(["-c", NO_WRITE_EXECUTE, program])
        .args(args)
        .env_remove("MCP_GATEWAY_CONFIG")
        .env_remove("MCP_GATEWAY_JWT_SECRET")
        .envs(env.iter().copied())
        .output()
        .expect("run python3");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `MemoryDenyWriteExecute=yes`: the binary needs no memory both writable and executable.
/// systemd enforces it with a seccomp filter; the kernel's own `PR_SET_MDWE` (Linux 6.3 and
/// later) refuses the same mappings, survives `exec` and needs no systemd, so a python3 wrapper
/// sets it and runs the binary (the workspace forbids unsafe code, so the test cannot call
/// `prctl` before an `exec` itself). `check-config` with a TLS listener loads the certificate
/// and key through rustls on aws-lc-rs, `token` signs with HS256, both allocate with mimalloc.
/// Skips loudly without python3 or on an older kernel.
#[test]
#[allow(clippy::print_stderr)]
fn the_binary_runs_without_writable_executable_memory() {
    let python = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("python3"))
            .find(|c| c.is_file())
    });
    let Some(python) = python else {
        eprintln!("\n*** SKIPPING the MemoryDenyWriteExecute check: python3 not found ***\n");
        return;
    };
    // The wrapper works: a writable and executable mapping is refused under it.
    let python_path = python.to_str().expect("python3 path");
    let (code, _, err) = without_write_execute(
        &python,
        python_path,
        &["-c", "import mmap; mmap.mmap(-1, 4096, prot=7)"],
        &[],
    );
    if code == 77 {
        eprintln!(
            "\n*** SKIPPING the MemoryDenyWriteExecute check: the kernel has no PR_SET_MDWE (Linux 6.3+) ***\n"
        );
        return;
    }
    assert!(
        code != 0 && err.contains("PermissionError"),
        "a W+X mapping must fail under the wrapper: exit {code}, {err}"
    );

    let gateway_toml = read(&systemd_dir().join("gateway.toml"));
    let dir = workdir("systemd-mdwe");
    let path = write(dir.path(), "gateway.toml", &gateway_toml);
    write(dir.path(), "users.json", r#"{"users": {}}"#);
    let path = path.to_str().expect("path");
    let (set, _) = env_example();
    let cert = format!("{}/tls_server.pem", support::FIXTURES);
    let key = format!("{}/tls_server_key.pem", support::FIXTURES);
    let mut env: Vec<(&str, &str)> = set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.extend([
        ("MCP_GATEWAY_LISTEN_TLS_CERT", cert.as_str()),
        ("MCP_GATEWAY_LISTEN_TLS_KEY", key.as_str()),
    ]);
    let (code, out, err) =
        without_write_execute(&python, bin(), &["check-config", "--config", path], &env);
    assert_eq!(code, 0, "check-config without W+X memory:\n{out}{err}");
    let (code, out, err) = without_write_execute(
        &python,
        bin(),
        &["token", "--config", path, "--sub", "alice"],
        &env,
    );
    assert_eq!(code, 0, "token without W+X memory:\n{out}{err}");
    assert_eq!(out.trim().matches('.').count(), 2, "a JWT: {out}");
}
