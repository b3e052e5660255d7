//! [`HaproxyProcess`]: Debian's `haproxy` as a plain HTTP/1.1 reverse proxy in front of the same
//! backends the gateway relays to, the floor a proxy of any kind costs on this machine.
//!
//! One process with one `listen` section per backend, each on a free loopback port: 2 threads
//! (`nbthread 2`, the machine's cores, as the gateway's runtime has), keep-alive on both sides
//! and idle backend connections shared between clients (`http-reuse always`, as the gateway
//! pools its upstream connections). No logging, no health checks: nothing the gateway's
//! benchmark configuration does not do either.

use std::fmt::Write as _;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_test_support::TempDir;

/// A running `haproxy`, killed by pid when dropped.
#[derive(Debug)]
pub struct HaproxyProcess {
    child: Child,
    fronts: Vec<SocketAddr>,
    log: std::path::PathBuf,
    _dir: TempDir,
}

impl HaproxyProcess {
    /// Writes a configuration with one frontend per backend in `backends` into a temp dir,
    /// starts `bin -f haproxy.cfg -db` (foreground; output to `haproxy.log`) and waits until
    /// every frontend accepts connections.
    ///
    /// # Errors
    ///
    /// When no free port is found, the binary cannot run, or it exits or does not listen within
    /// 10 s (its output is quoted).
    pub fn start(bin: &Path, backends: &[SocketAddr]) -> io::Result<Self> {
        let dir = TempDir::new("mcp-bench-haproxy")?;
        // Free ports as the kernel hands them out; released just before haproxy binds them, a
        // small race that only a busy port allocator could lose (the start then fails loudly).
        let fronts = backends
            .iter()
            .map(|_| free_port())
            .collect::<io::Result<Vec<_>>>()?;
        let config = dir.path().join("haproxy.cfg");
        let pairs: Vec<(SocketAddr, SocketAddr)> = fronts
            .iter()
            .copied()
            .zip(backends.iter().copied())
            .collect();
        std::fs::write(&config, config_text(&pairs))?;
        let log = dir.path().join("haproxy.log");
        // A file, not a pipe: nobody has to drain it while the benchmark runs.
        let output = std::fs::File::create(&log)?;
        let child = Command::new(bin)
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .spawn()?;
        let mut process = Self {
            child,
            fronts,
            log,
            _dir: dir,
        };
        process.wait_listening()?;
        Ok(process)
    }

    fn wait_listening(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.fronts.iter().all(|a| TcpStream::connect(a).is_ok()) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "haproxy exited ({status}) before listening:\n{}",
                    self.output()
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "haproxy did not listen within 10 s:\n{}",
                    self.output()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The frontend relaying to the `index`th backend given to [`start`](Self::start).
    #[must_use]
    pub fn front(&self, index: usize) -> Option<SocketAddr> {
        self.fronts.get(index).copied()
    }

    /// The process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for HaproxyProcess {
    fn drop(&mut self) {
        // SIGKILL by pid: a benchmark proxy has nothing to drain.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> io::Result<SocketAddr> {
    TcpListener::bind(("127.0.0.1", 0))?.local_addr()
}

/// The configuration: `frontend -> backend` pairs, one `listen` section each.
#[must_use]
pub fn config_text(pairs: &[(SocketAddr, SocketAddr)]) -> String {
    let mut text = String::from(
        "global
    nbthread 2
    maxconn 4096

defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
",
    );
    for (i, (front, backend)) in pairs.iter().enumerate() {
        let _ = write!(
            text,
            "\nlisten b{i}\n    bind {front}\n    server s{i} {backend}\n"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{self, Operation, Pace, Workload};
    use crate::protocol::{Endpoint, Era};
    use crate::{EchoBackend, proc_stats};
    use mcp_test_backends::{BackendSpec, TestBackend};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tools_call_passes_through_haproxy_to_both_kinds_of_backend() {
        let Some(bin) = proc_stats::find_program("haproxy") else {
            // `cargo xtask test` installs it (CI=true fails without it, as here); by hand,
            // without it there is nothing to run.
            assert!(
                !matches!(std::env::var("CI").as_deref(), Ok("true" | "1")),
                "haproxy is missing under CI"
            );
            return;
        };
        let echo = EchoBackend::builder()
            .era(Era::Legacy)
            .spawn()
            .await
            .expect("echo backend");
        let rmcp = TestBackend::try_start(BackendSpec::modern("echo").record_requests(false))
            .await
            .expect("rmcp backend");
        let proxy = HaproxyProcess::start(&bin, &[echo.addr(), rmcp.addr()]).expect("haproxy");
        for (index, era) in [(0, Era::Legacy), (1, Era::Modern)] {
            let front = proxy.front(index).expect("a frontend per backend");
            let result = load::run(&Workload {
                endpoints: vec![Endpoint::new(front, "/mcp")],
                era,
                operation: Operation::CallTool,
                concurrency: 2,
                pace: Pace::Closed,
                warmup: Duration::ZERO,
                duration: Duration::from_millis(100),
            })
            .await;
            assert_eq!(result.errors, 0, "{era}: {:?}", result.first_error);
            assert!(result.ops > 0, "{era}");
        }
        assert!(proxy.front(2).is_none());
        assert!(proc_stats::cpu_time(proxy.pid()).is_some());
    }

    #[test]
    fn the_config_has_two_threads_keep_alive_and_one_listen_per_backend() {
        let pair = |f: u16, b: u16| {
            (
                SocketAddr::from(([127, 0, 0, 1], f)),
                SocketAddr::from(([127, 0, 0, 1], b)),
            )
        };
        let text = config_text(&[pair(8001, 9001), pair(8002, 9002)]);
        assert!(text.contains("\n    nbthread 2\n"), "{text}");
        assert!(text.contains("\n    mode http\n"), "{text}");
        assert!(text.contains("\n    option http-keep-alive\n"), "{text}");
        assert!(text.contains("\n    http-reuse always\n"), "{text}");
        assert!(
            text.contains("listen b0\n    bind 127.0.0.1:8001\n    server s0 127.0.0.1:9001\n"),
            "{text}"
        );
        assert!(
            text.contains("listen b1\n    bind 127.0.0.1:8002\n    server s1 127.0.0.1:9002\n"),
            "{text}"
        );
        assert!(!text.contains("listen b2"), "{text}");
    }
}
