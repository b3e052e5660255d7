//! `--profile`: every system call a process makes over one run, counted by
//! `strace -c -f -p <pid>` (all threads, every syscall family).
//!
//! `strace` rather than `syscr`/`syscw` of `/proc/<pid>/io`: those count only the `read` and
//! `write` families, and both HAProxy and tokio move socket data with `recv`/`send`-family calls
//! and wait in `epoll_wait`, none of which they count. Tracing slows the traced process several
//! times over, so a traced run is an extra run whose throughput and latency are thrown away.

use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_test_support::TempDir;

/// `strace -c` attached to a process until [`finish`](Self::finish); killed by pid when dropped
/// unfinished (the kernel then detaches the traced process).
#[derive(Debug)]
pub struct Strace {
    child: Child,
    dir: TempDir,
}

impl Strace {
    /// Attaches `bin` (a `strace`) to every thread of `pid` and waits until it says so.
    ///
    /// # Errors
    ///
    /// When `strace` cannot run, exits, or does not attach within 10 s (its output is quoted).
    pub fn attach(bin: &Path, pid: u32) -> io::Result<Self> {
        let dir = TempDir::new("mcp-bench-strace")?;
        let messages = std::fs::File::create(dir.path().join("messages"))?;
        let child = Command::new(bin)
            .args(["-c", "-f", "-o"])
            .arg(dir.path().join("summary"))
            .arg("-p")
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // strace announces each attached thread on stderr.
            .stderr(messages)
            .spawn()?;
        let mut strace = Self { child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let messages = strace.messages();
            if messages.contains("attached") {
                return Ok(strace);
            }
            if let Some(status) = strace.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "strace exited ({status}) before attaching to {pid}: {messages}"
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "strace did not attach to {pid} within 10 s: {messages}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn messages(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("messages")).unwrap_or_default()
    }

    /// Detaches (SIGINT, as Ctrl-C would) and returns what strace counted.
    ///
    /// # Errors
    ///
    /// When the signal cannot be sent, or the summary has no total line.
    pub fn finish(mut self) -> io::Result<Counted> {
        let status = Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status()?;
        if !status.success() {
            return Err(io::Error::other(format!("kill -INT strace: {status}")));
        }
        self.child.wait()?;
        let summary = std::fs::read_to_string(self.dir.path().join("summary"))?;
        match total_calls(&summary) {
            Some(calls) => Ok(Counted { calls, summary }),
            None => Err(io::Error::other(format!(
                "no total in strace's summary: {summary}{}",
                self.messages()
            ))),
        }
    }
}

/// What one traced run counted.
#[derive(Debug)]
pub struct Counted {
    /// System calls of every thread.
    pub calls: u64,
    /// strace's table: calls per system call, the way to see which ones a change removed.
    pub summary: String,
}

impl Drop for Strace {
    fn drop(&mut self) {
        // Already waited for after `finish`; otherwise SIGKILL by pid.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `calls` column of the `total` line of a `strace -c` summary. Its `errors` column may be
/// empty, so the calls are the fourth field counted from the left.
#[must_use]
pub fn total_calls(summary: &str) -> Option<u64> {
    let line = summary
        .lines()
        .rev()
        .find(|l| l.split_whitespace().last() == Some("total"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMMARY: &str = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 61.23    0.512000          12     41200           epoll_wait
 20.00    0.167000           4     40001     12000 recvfrom
 18.77    0.157000           3     40002           sendto
------ ----------- ----------- --------- --------- ----------------
100.00    0.836000           6    121203     12000 total
";

    #[test]
    fn the_total_line_gives_the_calls_with_or_without_errors() {
        assert_eq!(total_calls(SUMMARY), Some(121_203));
        let no_errors = SUMMARY.replace("     12000 total", "           total");
        assert_eq!(total_calls(&no_errors), Some(121_203));
        assert_eq!(total_calls("strace: Process 1 attached\n"), None);
        assert_eq!(total_calls(""), None);
    }
}
