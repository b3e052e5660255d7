//! Reading a process's resident memory and CPU time from `/proc` (Linux), and finding the
//! programs the benchmark runs beside the gateway (`haproxy`, `strace`).

use std::time::Duration;

/// Resident set size of process `pid` in bytes (`VmRSS` of `/proc/<pid>/status`).
#[must_use]
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// User + system CPU time of process `pid` (all its threads), from `/proc/<pid>/stat`.
///
/// Steadier than wall time on a shared machine: it counts only what the process itself used.
/// The kernel reports it in clock ticks (usually 10 ms), so it suits runs of many requests.
#[must_use]
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: fields start after the
    // last `)`; utime and stime are fields 14 and 15, i.e. the 12th and 13th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / clock_ticks_per_second() as f64,
    ))
}

/// `sysconf(_SC_CLK_TCK)`, asked of `getconf` once (no libc binding for one value); 100, the
/// Linux default, when that fails.
fn clock_ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// The first executable file named `name` in a `PATH` directory.
#[must_use]
pub fn find_program(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_cpu_time() {
        let pid = std::process::id();
        let rss = rss_bytes(pid).expect("VmRSS of this process");
        assert!(rss > 0);
        // Burn a little CPU so the tick counter cannot legitimately read zero forever.
        let mut x = 0_u64;
        let before = cpu_time(pid).expect("stat of this process");
        while cpu_time(pid).expect("stat") <= before {
            for i in 0..100_000_u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
        }
        assert!(rss_bytes(u32::MAX).is_none());
        assert!(find_program("sh").is_some_and(|p| p.ends_with("sh")));
        assert!(find_program("mcp-bench-no-such-program").is_none());
        assert!(cpu_time(u32::MAX).is_none());
    }
}
