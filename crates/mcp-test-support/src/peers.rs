//! Real peers installed by `cargo xtask test` (the Python SDK venvs, the npm project): where they
//! are, whether they are installed from the current manifests, and `server-everything` run from
//! them. A missing peer skips its test loudly, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Written by `cargo xtask test` into each installed folder, holding the manifest it installed.
pub const MARKER: &str = ".interop-installed";

/// The repository root (two folders above this crate), where `cargo xtask test` installs the
/// peers (`.venv/`, `tests/interop/node/`) and where their scripts live (`tests/interop/`),
/// whichever crate's tests ask.
pub fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Whether this is a CI run (`CI=true`): missing peers fail instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Reports a skipped test. It must be visible in the test output, and stderr is the only channel
/// the test runners show for a passing test.
#[allow(clippy::print_stderr)]
pub fn skipped(reason: &str) {
    eprintln!("\n*** SKIPPING INTEROP TEST: {reason} ***\n");
}

/// True when `folder` was installed from the current `manifest` (its marker holds the same text)
/// and `needed` exists. Otherwise panics under `CI=true`, else reports the skip.
pub fn installed(folder: &Path, manifest: &Path, needed: &Path) -> bool {
    let marker = std::fs::read(folder.join(MARKER)).ok();
    let wanted = std::fs::read(manifest)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest.display()));
    if marker.as_deref() == Some(wanted.as_slice()) && needed.exists() {
        return true;
    }
    let reason = format!(
        "{} is missing or not installed from the current {}: run `cargo xtask test` once \
         (it installs the interop peers)",
        folder.display(),
        manifest.display()
    );
    if in_ci() {
        panic!("{reason}; CI=true requires the interop tests to run");
    }
    skipped(&reason);
    false
}

/// The interpreter of `.venv/<venv>` (`mcp1` or `mcp2`), when installed.
pub fn python(venv: &str) -> Option<PathBuf> {
    let folder = root().join(".venv").join(venv);
    let interpreter = folder.join("bin/python");
    let manifest = root().join(format!("tests/interop/requirements-{venv}.txt"));
    installed(&folder, &manifest, &interpreter).then_some(interpreter)
}

/// The npm project `tests/interop/node` (the TypeScript SDK, `server-everything`), when its
/// `node_modules` are installed from the current lock file and `node` runs. Otherwise panics
/// under `CI=true`, else reports the skip.
pub fn node_project() -> Option<PathBuf> {
    let project = root().join("tests/interop/node");
    let modules = project.join("node_modules");
    if !installed(
        &modules,
        &project.join("package-lock.json"),
        &modules.join("@modelcontextprotocol/server-everything/package.json"),
    ) {
        return None;
    }
    if Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        return Some(project);
    }
    let reason = "`node` is not on PATH";
    assert!(
        !in_ci(),
        "{reason}; CI=true requires the interop tests to run"
    );
    skipped(reason);
    None
}

/// The transport [`ServerEverything`] serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EverythingTransport {
    /// Streamable HTTP at `/mcp`.
    StreamableHttp,
    /// The 2024-11-05 HTTP+SSE transport at `/sse`.
    Sse,
}

/// The official `server-everything` as a node subprocess on a free port, killed on drop.
#[derive(Debug)]
pub struct ServerEverything {
    child: Child,
    port: u16,
    transport: EverythingTransport,
}

impl ServerEverything {
    /// Longest wait for it to accept connections (node loads it in seconds on a loaded machine).
    pub const START_TIMEOUT: Duration = Duration::from_secs(30);

    /// Starts it from `project` (see [`node_project`]) and waits until it accepts connections:
    /// polled, not timed. It has no option to pick the interface and binds all of them; its
    /// environment is emptied (it has a `get-env` tool).
    pub async fn start(project: &Path, transport: EverythingTransport) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let entry =
            project.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        let child = Command::new("node")
            .arg(&entry)
            .arg(match transport {
                EverythingTransport::StreamableHttp => "streamableHttp",
                EverythingTransport::Sse => "sse",
            })
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PORT", port.to_string())
            .current_dir(project)
            .stdin(Stdio::null())
            .stdout(Stdio::null()) // a line per request
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", entry.display()));
        let mut server = Self {
            child,
            port,
            transport,
        };
        let deadline = Instant::now() + Self::START_TIMEOUT;
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return server;
            }
            if let Some(status) = server.child.try_wait().expect("wait for server-everything") {
                panic!("server-everything exited before listening ({status})");
            }
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen on {port} within {:?}",
                Self::START_TIMEOUT
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Its endpoint: `http://127.0.0.1:<port>/mcp`, or `/sse` for the SSE transport.
    pub fn url(&self) -> String {
        let path = match self.transport {
            EverythingTransport::StreamableHttp => "mcp",
            EverythingTransport::Sse => "sse",
        };
        format!("http://127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for ServerEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
