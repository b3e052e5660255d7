//! [`RedisServer`]: a private `redis-server` for tests, or an external one from `REDIS_URL`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

use crate::TempDir;

/// How long a freshly spawned server may take to answer `PING`. Generous because a loaded 2-core CI
/// machine can be slow to schedule a new process; a healthy start takes a few milliseconds.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a new server is tried on a fresh port when the start fails (e.g. another process took
/// the port between our probe and the server's bind).
const START_ATTEMPTS: usize = 5;

/// A Redis server for tests.
///
/// Normally a private `redis-server` child process on a free `127.0.0.1` port, started with
/// `--save "" --appendonly no --notify-keyspace-events K$gx` in its own temp dir (no persistence, so
/// a restart starts empty; keyspace notifications on, so stores can observe plain `SET`s). It is
/// killed when this value is dropped. [`stop`](Self::stop) and [`restart`](Self::restart) simulate an
/// outage and a recovery on the same port.
///
/// When `REDIS_URL` is set, that external server is used instead and cannot be stopped; use
/// [`controllable`](Self::controllable) before fault injection.
///
/// ```
/// use mcp_test_support::RedisServer;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let Some(mut redis) = RedisServer::start().await else { return };
/// if let Some(redis) = redis.controllable() {
///     redis.stop().await;
///     assert!(!redis.is_running());
///     redis.restart().await;
///     assert!(redis.is_running());
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct RedisServer {
    mode: Mode,
}

// One value per test; boxing the child to shrink the enum would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Mode {
    Private {
        bin: PathBuf,
        port: u16,
        dir: TempDir,
        child: Option<Child>,
    },
    External {
        url: String,
        port: u16,
    },
}

impl RedisServer {
    /// Starts a private `redis-server` (or adopts `REDIS_URL`) and waits until it answers `PING`.
    ///
    /// Returns `None` when no `redis-server` binary is available (`$REDIS_SERVER_BIN`, then `PATH`);
    /// a loud message on stderr says the Redis tests are skipped.
    ///
    /// # Panics
    ///
    /// - When the binary is missing and the environment has `CI=true` (a CI run must not skip the
    ///   Redis tests silently).
    /// - When the binary exists but no server could be started (that is a broken environment, not a
    ///   reason to skip).
    pub async fn start() -> Option<Self> {
        if let Some(url) = std::env::var("REDIS_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
        {
            let port = port_from_url(&url);
            return Some(Self {
                mode: Mode::External { url, port },
            });
        }
        let Some(bin) = find_binary() else {
            report_missing_binary();
            return None;
        };
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = match free_port().await {
                Ok(port) => port,
                Err(e) => {
                    last_error = format!("no free port: {e}");
                    continue;
                }
            };
            let dir = match TempDir::new("redis") {
                Ok(dir) => dir,
                Err(e) => {
                    last_error = format!("no temp dir: {e}");
                    continue;
                }
            };
            match spawn_and_wait(&bin, port, dir.path()).await {
                Ok(child) => {
                    return Some(Self {
                        mode: Mode::Private {
                            bin,
                            port,
                            dir,
                            child: Some(child),
                        },
                    });
                }
                Err(e) => last_error = e,
            }
        }
        panic!(
            "could not start {} after {START_ATTEMPTS} attempts: {last_error}",
            bin.display()
        );
    }

    /// The connection URL, e.g. `redis://127.0.0.1:40123/`.
    pub fn url(&self) -> String {
        match &self.mode {
            Mode::Private { port, .. } => format!("redis://127.0.0.1:{port}/"),
            Mode::External { url, .. } => url.clone(),
        }
    }

    /// The TCP port (for an external server: the URL's port, 6379 when it has none).
    pub fn port(&self) -> u16 {
        match &self.mode {
            Mode::Private { port, .. } | Mode::External { port, .. } => *port,
        }
    }

    /// Whether this is an external server taken from `REDIS_URL`.
    pub fn is_external(&self) -> bool {
        matches!(self.mode, Mode::External { .. })
    }

    /// `Some(self)` when the server can be stopped, restarted or reconfigured (a private server);
    /// `None`, with a loud message on stderr, for an external `REDIS_URL` server, so fault tests
    /// can skip.
    pub fn controllable(&mut self) -> Option<&mut Self> {
        if self.is_external() {
            skipped(
                "this test needs a private redis-server it can stop, restart or reconfigure; REDIS_URL points at an external server",
            );
            return None;
        }
        Some(self)
    }

    /// Whether the private server process is running (always `true` for an external server).
    pub fn is_running(&self) -> bool {
        match &self.mode {
            Mode::Private { child, .. } => child.is_some(),
            Mode::External { .. } => true,
        }
    }

    /// Kills the server and waits for it to exit: clients see connections drop and new connections
    /// refused, as in an outage. Does nothing when it is already stopped.
    ///
    /// # Panics
    ///
    /// On an external server (check [`controllable`](Self::controllable) first).
    pub async fn stop(&mut self) {
        match &mut self.mode {
            Mode::Private { child, .. } => {
                if let Some(mut child) = child.take() {
                    // `kill` sends SIGKILL and reaps the process, so the port is closed on return.
                    let _ = child.kill().await;
                }
            }
            Mode::External { .. } => {
                panic!("cannot stop an external REDIS_URL server; call controllable() first")
            }
        }
    }

    /// Starts the server again on the same port (stopping it first if it runs) and waits until it
    /// answers `PING`. Data is gone: the server runs without persistence.
    ///
    /// # Panics
    ///
    /// On an external server, or when the server cannot be started again within a few seconds.
    pub async fn restart(&mut self) {
        self.stop().await;
        let Mode::Private {
            bin,
            port,
            dir,
            child,
        } = &mut self.mode
        else {
            panic!("cannot restart an external REDIS_URL server; call controllable() first");
        };
        let mut last_error = String::new();
        // The port can stay busy for a moment after the kill; retry instead of failing at once.
        for _ in 0..START_ATTEMPTS {
            match spawn_and_wait(bin, *port, dir.path()).await {
                Ok(new_child) => {
                    *child = Some(new_child);
                    return;
                }
                Err(e) => {
                    last_error = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        panic!("could not restart redis-server on port {port}: {last_error}");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Mode::Private {
            child: Some(child), ..
        } = &mut self.mode
        {
            // `kill_on_drop` would do this too; being explicit keeps the intent visible. Tokio reaps
            // the process in the background.
            let _ = child.start_kill();
        }
    }
}

/// `$REDIS_SERVER_BIN` if set, else the first `redis-server` on `PATH`.
pub(crate) fn find_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("REDIS_SERVER_BIN").filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        return bin.is_file().then_some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

pub(crate) fn report_missing_binary() {
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    let msg =
        "redis-server not found (set REDIS_SERVER_BIN, put redis-server on PATH, or set REDIS_URL)";
    if ci {
        panic!("{msg}; CI=true requires the Redis-backed tests to run");
    }
    skipped(msg);
}

// Test support is a library, so printing needs an explicit allow: a skipped Redis test must be
// visible in the test output, and stderr is the only channel cargo test shows for passing tests.
#[allow(clippy::print_stderr)]
pub(crate) fn skipped(reason: &str) {
    eprintln!("\n*** SKIPPING REDIS TEST: {reason} ***\n");
}

/// A port that was free a moment ago (bound to port 0, then released).
pub(crate) async fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    Ok(listener.local_addr()?.port())
}

async fn spawn_and_wait(bin: &Path, port: u16, dir: &Path) -> Result<Child, String> {
    let log = dir.join("redis.log");
    let mut child = Command::new(bin)
        .arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--save")
        .arg("")
        .arg("--appendonly")
        .arg("no")
        .arg("--notify-keyspace-events")
        .arg("K$gx")
        .arg("--daemonize")
        .arg("no")
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let deadline = tokio::time::Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: String = tail.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
            return Err(format!("redis-server exited with {status}: {tail}"));
        }
        if ping(port).await {
            return Ok(child);
        }
        if tokio::time::Instant::now() >= deadline {
            let _ = child.kill().await;
            return Err(format!(
                "redis-server on port {port} did not answer PING within {STARTUP_TIMEOUT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Raw RESP inline `PING`; no Redis client needed. `true` on `+PONG`.
pub(crate) async fn ping(port: u16) -> bool {
    answers_ping_with(port, b"+PONG", Duration::from_millis(500)).await
}

/// Whether the server on `port` answers `PING` with a reply starting with `prefix` (`+PONG`,
/// `-LOADING`, …) within `wait`.
pub(crate) async fn answers_ping_with(port: u16, prefix: &[u8], wait: Duration) -> bool {
    let attempt = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        stream.write_all(b"PING\r\n").await.ok()?;
        let mut buf = [0u8; 16];
        let n = stream.read(&mut buf).await.ok()?;
        Some(buf.get(..n)?.starts_with(prefix))
    };
    matches!(tokio::time::timeout(wait, attempt).await, Ok(Some(true)))
}

/// The port of a `redis://[user:pass@]host[:port][/db]` URL; 6379 when absent or unparsable.
fn port_from_url(url: &str) -> u16 {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    // `]` guards IPv6 literals such as `[::1]:6380`.
    match host_port.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') && !host.is_empty() => {
            port.parse().unwrap_or(6379)
        }
        _ => 6379,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_is_parsed_from_urls() {
        assert_eq!(port_from_url("redis://127.0.0.1:6380/"), 6380);
        assert_eq!(port_from_url("redis://user:pw@host:7000/2"), 7000);
        assert_eq!(port_from_url("redis://host"), 6379);
        assert_eq!(port_from_url("redis://[::1]:6390"), 6390);
        assert_eq!(port_from_url("redis://[::1]"), 6379);
    }

    #[tokio::test]
    async fn private_server_answers_and_survives_restart() {
        let Some(mut redis) = RedisServer::start().await else {
            return;
        };
        let Some(redis) = redis.controllable() else {
            return;
        };
        assert!(ping(redis.port()).await);
        redis.stop().await;
        assert!(!ping(redis.port()).await, "stopped server still answers");
        redis.restart().await;
        assert!(ping(redis.port()).await, "restarted server does not answer");
    }
}
