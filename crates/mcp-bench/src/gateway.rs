//! [`GatewayProcess`]: the `mcp-gateway` binary started as a real process with a generated
//! configuration and an HS256 secret, killed by pid when dropped (every exit path, panics
//! included).

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_test_support::TempDir;

use crate::proc_stats;

/// The HS256 secret of benchmark gateways (a local benchmark's, not a deployment's).
const JWT_SECRET: &str = "mcp-bench-hs256-secret-mcp-bench-hs256-secret";
/// The sealed session store's key ring (`id:base64 of 32 bytes`).
const SESSION_KEYS: &str = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// The subject whose user configuration the benchmark uses.
pub const SUBJECT: &str = "bench";

/// Where a benchmark gateway keeps its legacy sessions (`[sessions] kind`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionStoreKind {
    /// In the gateway process.
    Local,
    /// In Redis at this URL.
    Redis(String),
    /// In the session id itself (AES-256-GCM sealed records).
    Sealed,
}

impl fmt::Display for SessionStoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Local => "local",
            Self::Redis(_) => "redis",
            Self::Sealed => "sealed",
        })
    }
}

/// The gateway binary a benchmark starts, and how its process runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayBin {
    /// The release `mcp-gateway` binary.
    pub path: PathBuf,
    /// Its `runtime.mode`.
    pub runtime: RuntimeMode,
}

impl GatewayBin {
    /// `path` on the gateway's default runtime.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            runtime: RuntimeMode::default(),
        }
    }
}

/// The gateway's `runtime.mode` (book: docs/src/gateway.md, "Runtime").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RuntimeMode {
    /// One work-stealing runtime (the gateway's default).
    #[default]
    WorkStealing,
    /// One single-threaded runtime per core, `SO_REUSEPORT` listeners.
    ThreadPerCore,
}

impl RuntimeMode {
    /// The configuration value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WorkStealing => "work-stealing",
            Self::ThreadPerCore => "thread-per-core",
        }
    }
}

/// A running gateway process.
#[derive(Debug)]
pub struct GatewayProcess {
    child: Child,
    addr: SocketAddr,
    token: String,
    log: PathBuf,
    _dir: TempDir,
}

impl GatewayProcess {
    /// Writes `users_json` (the file config store's document), the plugin document `plugins`
    /// when given, and a `gateway.toml` into a temp dir, mints a token for [`SUBJECT`] with the
    /// binary's `token` command, starts `mcp-gateway serve` (stderr to `gateway.log`) and waits
    /// for its `listening` line.
    ///
    /// # Errors
    ///
    /// When the binary cannot run, the token cannot be minted, or the gateway exits or does not
    /// listen within 60 s (the log is quoted).
    pub fn start(
        bin: &GatewayBin,
        sessions: &SessionStoreKind,
        users_json: &str,
        plugins: Option<&str>,
    ) -> io::Result<Self> {
        Self::start_under(&[], bin, sessions, users_json, plugins)
    }

    /// Like [`start`](Self::start), with the gateway run by `wrapper` (a program and its
    /// arguments, `valgrind --tool=callgrind` say; none: run directly). The process id is then
    /// the wrapper's, which for valgrind is the gateway's own.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_under(
        wrapper: &[OsString],
        bin: &GatewayBin,
        sessions: &SessionStoreKind,
        users_json: &str,
        plugins: Option<&str>,
    ) -> io::Result<Self> {
        let dir = TempDir::new("mcp-bench-gateway")?;
        std::fs::write(dir.path().join("users.json"), users_json)?;
        let mut toml = config_toml(sessions, bin.runtime);
        if let Some(document) = plugins {
            std::fs::write(dir.path().join("plugins.toml"), document)?;
            toml.push_str("\n[plugins]\nconfig = \"plugins.toml\"\n");
        }
        let config = dir.path().join("gateway.toml");
        std::fs::write(&config, toml)?;
        let token = mint_token(&bin.path, &config)?;
        let log = dir.path().join("gateway.log");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(&bin.path);
                command
            }
            None => Command::new(&bin.path),
        };
        let child = command
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("MCP_GATEWAY_JWT_SECRET", JWT_SECRET)
            .env("MCP_BENCH_SESSION_KEYS", SESSION_KEYS)
            .env_remove("MCP_GATEWAY_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // A file, not a pipe: nobody has to drain it while the benchmark runs.
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let mut process = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            token,
            log,
            _dir: dir,
        };
        process.addr = process.wait_listening()?;
        Ok(process)
    }

    fn wait_listening(&mut self) -> io::Result<SocketAddr> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            // The JSON log format puts an event's fields at the top level.
            let listening = log
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|event| event["message"] == "listening");
            if let Some(event) = listening {
                let addr = event["addr"].as_str().and_then(|a| a.parse().ok());
                return addr.ok_or_else(|| io::Error::other(format!("no addr in {event}")));
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "mcp-gateway exited ({status}) before listening:\n{log}"
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "mcp-gateway did not listen within 60 s:\n{log}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The MCP listener's address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A bearer token the gateway accepts for [`SUBJECT`].
    #[must_use]
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident memory now.
    #[must_use]
    pub fn rss_bytes(&self) -> Option<u64> {
        proc_stats::rss_bytes(self.pid())
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        // SIGKILL by pid: a benchmark gateway has nothing to drain.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config_toml(sessions: &SessionStoreKind, runtime: RuntimeMode) -> String {
    let store = match sessions {
        SessionStoreKind::Local => "kind = \"local\"".to_owned(),
        SessionStoreKind::Redis(url) => format!("kind = \"redis\"\nurl = \"{url}\""),
        SessionStoreKind::Sealed => {
            "kind = \"sealed\"\nkeys_env = \"MCP_BENCH_SESSION_KEYS\"".to_owned()
        }
    };
    let runtime = runtime.as_str();
    format!(
        r#"shutdown_drain_s = 1

[listen]
addr = "127.0.0.1:0"
admin_addr = ""

[runtime]
mode = "{runtime}"

[auth.jwt]
issuer = "https://bench.invalid"
audience = "mcp-gateway"
hs256_secret_env = "MCP_GATEWAY_JWT_SECRET"

[config_store]
kind = "file"
path = "users.json"
poll_interval_ms = 0

[sessions]
{store}
max_sessions = 1000000
max_per_principal = 1000000

[telemetry]
log_format = "json"
log_level = "warn,mcp_gateway=info"
access_log = false
"#
    )
}

fn mint_token(bin: &Path, config: &Path) -> io::Result<String> {
    let out = Command::new(bin)
        .args(["token", "--sub", SUBJECT, "--ttl", "24h", "--config"])
        .arg(config)
        .env("MCP_GATEWAY_JWT_SECRET", JWT_SECRET)
        .env("MCP_BENCH_SESSION_KEYS", SESSION_KEYS)
        .env_remove("MCP_GATEWAY_CONFIG")
        .stdin(Stdio::null())
        .output()?;
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && !token.is_empty() {
        Ok(token)
    } else {
        Err(io::Error::other(format!(
            "mcp-gateway token failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}
