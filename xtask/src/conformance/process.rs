//! Child processes that are always torn down (by pid, on drop: also on an early error return),
//! free ports, and waiting for a listener.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for a started server to accept connections (interpreter start-up on a loaded
/// 2-core machine included).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running child process, killed (by its pid) and reaped when dropped.
pub(crate) struct Spawned {
    name: String,
    child: Child,
}

impl Spawned {
    /// Starts `command` with stdin closed and stdout + stderr appended to `log`.
    pub(crate) fn start(name: &str, mut command: Command, log: &Path) -> Result<Self, String> {
        let out = std::fs::File::create(log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Self {
            name: name.to_owned(),
            child,
        })
    }

    /// Waits until `addr` accepts a connection; fails when the child exits first or the wait
    /// exceeds [`START_TIMEOUT`].
    pub(crate) fn wait_listening(&mut self, addr: SocketAddr, log: &Path) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited before listening on {addr} ({status}); see {}",
                    self.name,
                    log.display()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not listen on {addr} within {START_TIMEOUT:?}; see {}",
                    self.name,
                    log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // Child::kill signals exactly this pid; an already exited child is fine.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on right now.
pub(crate) fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// The loopback address with `port`.
pub(crate) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Runs `command` to completion (at most `timeout`, then it is killed), stdin closed, and
/// returns (success, stdout, stderr).
pub(crate) fn output_within(
    name: &str,
    mut command: Command,
    timeout: Duration,
) -> Result<(bool, String, String), String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = stdout.join().unwrap_or_default();
    let mut err = stderr.join().unwrap_or_default();
    if status.is_none() {
        err.push_str(&format!("\n(killed after {timeout:?})"));
    }
    Ok((status.is_some_and(|s| s.success()), out, err))
}

/// Reads a pipe to its end on a thread, so a full pipe never blocks the child.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}
