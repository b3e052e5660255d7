//! [`PortedChild`]: a test server started as a child process that reports its port.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

/// A child process that printed `PORT <n>` as its first stdout line (test servers bound to a free
/// port); killed when dropped.
#[derive(Debug)]
pub struct PortedChild {
    /// The child, for tests that signal or wait for it.
    pub child: tokio::process::Child,
    /// The port it reported.
    pub port: u16,
}

impl PortedChild {
    /// Spawns `command` (stdout piped, killed on drop) and waits for its `PORT <n>` line.
    ///
    /// # Panics
    /// When the process cannot start or its first line is not `PORT <n>` (a test setup error).
    pub async fn spawn(mut command: tokio::process::Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let line = BufReader::new(stdout)
            .lines()
            .next_line()
            .await
            .expect("read stdout")
            .unwrap_or_else(|| panic!("{command:?} exited before reporting its port"));
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?} from {command:?}"));
        Self { child, port }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_reported_port_is_read() {
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", "echo 'PORT 4321'; exec sleep 30"]);
        let server = PortedChild::spawn(command).await;
        assert_eq!(server.port, 4321);
    }
}
