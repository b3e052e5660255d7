//! `--instructions`: the gateway's CPU instructions per operation, counted by valgrind's
//! callgrind. Instruction counts do not depend on what else the machine is doing, so they
//! measure one optimisation step on a busy 2-core box where throughput cannot (book:
//! docs/src/performance.md).
//!
//! The gateway runs under `valgrind --tool=callgrind`; for each scenario one client warms up
//! (connection, session, caches), `callgrind_control --zero` clears the counters, the client
//! runs a fixed number of operations one after another on its keep-alive connection (16
//! clients at once in the concurrent cases), and
//! `callgrind_control --dump` writes the totals, divided by the operation count. The client
//! runs outside valgrind; every instruction counted is the gateway's (all its threads). The
//! dumps stay in the output directory for `callgrind_annotate` (which functions the
//! instructions went to).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use tokio::runtime::Handle;

use crate::breakdown;
use crate::client::McpClient;
use crate::gateway::{GatewayBin, GatewayProcess, RuntimeMode, SessionStoreKind};
use crate::load::{self, Operation};
use crate::proc_stats;
use crate::protocol::Era;
use crate::scenario::{self, Progress};
use crate::syscalls::Strace;

/// Operations each scenario runs before the counters are zeroed.
const WARMUP: u64 = 50;

/// What was counted: instructions per operation by scenario.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InstructionReport {
    /// The source revision measured.
    pub git_rev: Option<String>,
    /// The gateway's `runtime.mode` (reports from before it was recorded: the default).
    #[serde(default = "default_runtime")]
    pub runtime: String,
    /// When (UTC).
    pub date: String,
    /// Scenario name to its count.
    pub scenarios: BTreeMap<String, InstructionCount>,
}

fn default_runtime() -> String {
    RuntimeMode::default().as_str().to_owned()
}

/// One scenario's count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstructionCount {
    /// Operations counted.
    pub ops: u64,
    /// Gateway instructions (all threads) per operation.
    pub per_op: f64,
    /// Gateway system calls per operation (`strace -c -f`, a separate run), when strace ran.
    #[serde(default)]
    pub syscalls_per_op: Option<f64>,
    /// The callgrind dump of the counted operations (in the output directory).
    pub dump: String,
    /// strace's table of the system call count (in the output directory), when strace ran.
    #[serde(default)]
    pub syscall_table: Option<String>,
    /// Instructions per operation by part of the stack ([`breakdown::PARTS`]; reports from
    /// before it was recorded: empty).
    #[serde(default)]
    pub parts: BTreeMap<String, f64>,
}

/// One scenario: what a client does, where, how often.
struct Case {
    name: String,
    vhost: &'static str,
    tool: &'static str,
    era: Era,
    operation: Operation,
    /// Clients at once (each on its own connection).
    clients: usize,
    /// Operations of all clients together (a multiple of `clients`).
    ops: u64,
}

/// Starts the echo backends and a gateway under callgrind, counts every scenario; the dumps go
/// to `dumps` (a directory; earlier dumps there are removed).
///
/// # Errors
///
/// When valgrind or `callgrind_control` is missing, a backend or the gateway cannot start, an
/// operation fails, or a dump cannot be read.
pub async fn run(
    gateway_bin: &GatewayBin,
    git_rev: Option<String>,
    dumps: &Path,
    backends: &Handle,
    progress: Progress<'_>,
) -> Result<InstructionReport, String> {
    let valgrind = proc_stats::find_program("valgrind")
        .ok_or("valgrind not found: install it (Debian package valgrind)")?;
    let control = proc_stats::find_program("callgrind_control")
        .ok_or("callgrind_control not found: install valgrind")?;
    let servers = scenario::EchoServers::start(backends, &[4], 20).await?;
    let targets = servers.call_targets();
    let users = scenario::users_json(&targets, &servers.fan, &[4]);

    if dumps.exists() {
        std::fs::remove_dir_all(dumps).map_err(|e| format!("{}: {e}", dumps.display()))?;
    }
    std::fs::create_dir_all(dumps).map_err(|e| format!("{}: {e}", dumps.display()))?;
    let out_file = dumps.join("callgrind.out");
    let wrapper = [
        valgrind.into_os_string(),
        "--tool=callgrind".into(),
        // Totals and each function's own cost are read; without per-instruction data the
        // dumps stay small.
        "--dump-instr=no".into(),
        "--compress-strings=no".into(),
        format!("--callgrind-out-file={}", out_file.display()).into(),
    ];
    progress("starting the gateway under callgrind (slow: valgrind translates it first)");
    let gateway = GatewayProcess::start_under(
        &wrapper,
        gateway_bin,
        &SessionStoreKind::Local,
        &users,
        None,
    )
    .map_err(|e| e.to_string())?;

    let mut cases: Vec<Case> = targets
        .iter()
        .map(|target| Case {
            name: target.scenario.clone(),
            vhost: target.vhost,
            tool: "echo-echo",
            era: target.era,
            operation: Operation::CallTool,
            clients: 1,
            ops: 1000,
        })
        .collect();
    cases.extend([
        // Many callers at once: what scheduling and shared state cost per call.
        Case {
            name: "tools/call modern, 16 clients".into(),
            vhost: "modern",
            tool: "echo-echo",
            era: Era::Modern,
            operation: Operation::CallTool,
            clients: 16,
            ops: 1600,
        },
        Case {
            name: "tools/call legacy, 16 clients".into(),
            vhost: "legacy",
            tool: "echo-echo",
            era: Era::Legacy,
            operation: Operation::CallTool,
            clients: 16,
            ops: 1600,
        },
        Case {
            name: "tools/list fan-out x4".into(),
            vhost: "fan4",
            tool: "",
            era: Era::Modern,
            operation: Operation::ListTools,
            clients: 1,
            ops: 200,
        },
        Case {
            name: "server/discover".into(),
            vhost: "modern",
            tool: "",
            era: Era::Modern,
            operation: Operation::Discover,
            clients: 1,
            ops: 500,
        },
        Case {
            name: "legacy session setup".into(),
            vhost: "legacy",
            tool: "echo-echo",
            era: Era::Legacy,
            operation: Operation::SessionCycle,
            clients: 1,
            ops: 300,
        },
    ]);

    let mut report = InstructionReport {
        git_rev,
        runtime: gateway_bin.runtime.as_str().to_owned(),
        date: scenario::utc_now(),
        scenarios: BTreeMap::new(),
    };
    for case in &cases {
        progress(&format!("{}: {} operations", case.name, case.ops));
        let mut clients = case.warm_clients(&gateway).await?;
        callgrind_control(&control, "--zero", gateway.pid())?;
        case.run(&mut clients).await?;
        callgrind_control(&control, "--dump", gateway.pid())?;
        let (total, dump, text) = latest_total(&out_file)?;
        let parts = breakdown::by_part(&text)
            .into_iter()
            .map(|(part, n)| (part.to_owned(), n as f64 / case.ops as f64))
            .collect();
        report.scenarios.insert(
            case.name.clone(),
            InstructionCount {
                ops: case.ops,
                per_op: total as f64 / case.ops as f64,
                syscalls_per_op: None,
                dump,
                syscall_table: None,
                parts,
            },
        );
    }
    drop(gateway);

    // System calls are counted on a gateway of its own: under valgrind every call would be
    // the emulator's.
    let Some(strace) = proc_stats::find_program("strace") else {
        progress("strace not found: no system calls counted (install strace)");
        return Ok(report);
    };
    progress("starting a plain gateway for the system call counts (strace)");
    let gateway = GatewayProcess::start(gateway_bin, &SessionStoreKind::Local, &users, None)
        .map_err(|e| e.to_string())?;
    for (index, case) in cases.iter().enumerate() {
        progress(&format!("{}: system calls", case.name));
        let mut clients = case.warm_clients(&gateway).await?;
        let traced = Strace::attach(&strace, gateway.pid()).map_err(|e| e.to_string())?;
        case.run(&mut clients).await?;
        let counted = traced.finish().map_err(|e| e.to_string())?;
        // Which calls they are is what tells a wake-up from a write: kept beside the dumps.
        let table = format!("strace.{}.txt", index + 1);
        let path = dumps.join(&table);
        let text = format!(
            "{} ({} operations)\n\n{}",
            case.name, case.ops, counted.summary
        );
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(count) = report.scenarios.get_mut(&case.name) {
            count.syscalls_per_op = Some(counted.calls as f64 / case.ops as f64);
            count.syscall_table = Some(table);
        }
    }
    Ok(report)
}

impl Case {
    /// This case's clients of its virtual host on `gateway`, after the warm-up operations.
    async fn warm_clients(&self, gateway: &GatewayProcess) -> Result<Vec<McpClient>, String> {
        let endpoint = scenario::through(gateway, self.vhost, self.tool);
        let mut clients: Vec<McpClient> = (0..self.clients)
            .map(|_| McpClient::new(endpoint.clone(), self.era))
            .collect();
        for client in &mut clients {
            for _ in 0..WARMUP {
                load::iterate(self.operation, std::slice::from_mut(client))
                    .await
                    .map_err(|e| format!("{} (warm-up): {e}", self.name))?;
            }
        }
        Ok(clients)
    }

    /// The counted operations: each client runs its share one after another, the clients at
    /// once.
    async fn run(&self, clients: &mut [McpClient]) -> Result<(), String> {
        let share = self.ops / self.clients as u64;
        let runs = clients.iter_mut().map(|client| async move {
            for _ in 0..share {
                load::iterate(self.operation, std::slice::from_mut(client))
                    .await
                    .map_err(|e| format!("{}: {e}", self.name))?;
            }
            Ok::<(), String>(())
        });
        join_all(runs).await.into_iter().collect()
    }
}

fn callgrind_control(control: &Path, action: &str, pid: u32) -> Result<(), String> {
    let out = Command::new(control)
        .arg(action)
        .arg(pid.to_string())
        .output()
        .map_err(|e| format!("{}: {e}", control.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    // It exits 0 even when it found no such process; "OK." is what success prints.
    if out.status.success() && stdout.contains("OK.") {
        Ok(())
    } else {
        Err(format!(
            "callgrind_control {action} {pid} failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The `totals:`, file name and text of the newest dump `<out_file>.<n>` (callgrind numbers its
/// dumps from 1).
fn latest_total(out_file: &Path) -> Result<(u64, String, String), String> {
    let dir = out_file.parent().ok_or("a dump file has a directory")?;
    let prefix = format!(
        "{}.",
        out_file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or("the dump file name is UTF-8")?
    );
    let newest: Option<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let n = name.strip_prefix(&prefix)?.parse().ok()?;
            Some((n, entry.path()))
        })
        .max_by_key(|(n, _)| *n);
    let (n, path) =
        newest.ok_or_else(|| format!("no callgrind dump next to {}", out_file.display()))?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let total =
        parse_total(&text).ok_or_else(|| format!("no `totals:` line in {}", path.display()))?;
    Ok((total, format!("{prefix}{n}"), text))
}

/// The first event (instructions, `Ir`) of a callgrind dump's `totals:` line (`summary:` in
/// older formats).
fn parse_total(dump: &str) -> Option<u64> {
    let line = |prefix: &str| dump.lines().find_map(|l| l.strip_prefix(prefix));
    line("totals:")
        .or_else(|| line("summary:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

impl InstructionReport {
    /// A Markdown table; with a baseline, its figure and now/baseline per scenario.
    #[must_use]
    pub fn markdown(&self, baseline: Option<&Self>) -> String {
        let mut out = format!(
            "# Gateway instructions per operation (callgrind)\n\nRevision {}, {}, gateway runtime \
             `{}`. One client (unless the scenario says otherwise), one keep-alive connection \
             each, after {WARMUP} warm-up operations per client; all gateway threads. System \
             calls: a separate run without valgrind, `strace -c -f`.\n\n",
            self.git_rev.as_deref().unwrap_or("unknown"),
            self.date,
            self.runtime
        );
        match baseline {
            None => {
                out.push_str(
                    "| scenario | operations | instructions per operation | system calls per operation | dump | system calls |\n|---|---:|---:|---:|---|---|\n",
                );
                for (name, count) in &self.scenarios {
                    out.push_str(&format!(
                        "| {name} | {} | {:.0} | {} | {} | {} |\n",
                        count.ops,
                        count.per_op,
                        syscalls(count.syscalls_per_op),
                        count.dump,
                        count.syscall_table.as_deref().unwrap_or("-")
                    ));
                }
            }
            Some(base) => {
                out.push_str(&format!(
                    "Baseline: revision {}, {}.\n\n| scenario | baseline | now | now/baseline | system calls baseline | now |\n|---|---:|---:|---:|---:|---:|\n",
                    base.git_rev.as_deref().unwrap_or("unknown"),
                    base.date
                ));
                for (name, count) in &self.scenarios {
                    match base.scenarios.get(name) {
                        Some(before) if before.per_op > 0.0 => out.push_str(&format!(
                            "| {name} | {:.0} | {:.0} | {:.3} | {} | {} |\n",
                            before.per_op,
                            count.per_op,
                            count.per_op / before.per_op,
                            syscalls(before.syscalls_per_op),
                            syscalls(count.syscalls_per_op)
                        )),
                        _ => out.push_str(&format!(
                            "| {name} | — | {:.0} | — | — | {} |\n",
                            count.per_op,
                            syscalls(count.syscalls_per_op)
                        )),
                    }
                }
            }
        }
        out.push_str(&self.parts_markdown());
        out
    }

    /// Where each scenario's instructions went ([`breakdown`]): thousands per operation and
    /// the share of the total, by part; empty when no scenario has a breakdown.
    fn parts_markdown(&self) -> String {
        if self.scenarios.values().all(|c| c.parts.is_empty()) {
            return String::new();
        }
        let mut out = String::from(
            "\n## Where the instructions go\n\nEach function's own instructions, summed by the \
             part of the stack it belongs to; thousands per operation (share of the total).\n\n| scenario |",
        );
        for (part, _) in breakdown::PARTS {
            out.push_str(&format!(" {part} |"));
        }
        out.push_str("\n|---|");
        out.push_str(&"---:|".repeat(breakdown::PARTS.len()));
        out.push('\n');
        for (name, count) in self.scenarios.iter().filter(|(_, c)| !c.parts.is_empty()) {
            let total: f64 = count.parts.values().sum();
            out.push_str(&format!("| {name} |"));
            for (part, _) in breakdown::PARTS {
                let n = count.parts.get(part).copied().unwrap_or(0.0);
                let share = if total > 0.0 { 100.0 * n / total } else { 0.0 };
                out.push_str(&format!(" {:.1} ({share:.0} %) |", n / 1000.0));
            }
            out.push('\n');
        }
        out.push('\n');
        for (part, holds) in breakdown::PARTS {
            out.push_str(&format!("- {part}: {holds}\n"));
        }
        out
    }
}

fn syscalls(per_op: Option<f64>) -> String {
    per_op.map_or_else(|| "—".to_owned(), |n| format!("{n:.1}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_the_first_event_of_the_totals_line() {
        let dump =
            "version: 1\ncmd: mcp-gateway serve\nevents: Ir\nsummary: 99\ntotals: 123456 7\n";
        assert_eq!(parse_total(dump), Some(123_456));
        assert_eq!(parse_total("events: Ir\nsummary: 42\n"), Some(42));
        assert_eq!(parse_total("events: Ir\n"), None);
    }

    #[test]
    fn the_newest_numbered_dump_is_read() {
        let dir = mcp_test_support::TempDir::new("mcp-bench-dumps").expect("temp dir");
        let out = dir.path().join("callgrind.out");
        std::fs::write(dir.path().join("callgrind.out.2"), "totals: 20\n").expect("write");
        std::fs::write(dir.path().join("callgrind.out.10"), "totals: 100\n").expect("write");
        std::fs::write(dir.path().join("callgrind.out"), "totals: 1\n").expect("write");
        assert_eq!(
            latest_total(&out),
            Ok((
                100,
                "callgrind.out.10".to_owned(),
                "totals: 100\n".to_owned()
            ))
        );
        let empty = mcp_test_support::TempDir::new("mcp-bench-no-dumps").expect("temp dir");
        let missing = latest_total(&empty.path().join("callgrind.out"));
        assert!(missing.is_err_and(|e| e.starts_with("no callgrind dump")));
    }

    #[test]
    fn the_markdown_compares_with_a_baseline() {
        let report = |per_op: f64| InstructionReport {
            git_rev: Some("abc".into()),
            runtime: default_runtime(),
            date: "2026-12-05".into(),
            scenarios: BTreeMap::from([(
                "tools/call modern".into(),
                InstructionCount {
                    ops: 10,
                    per_op,
                    syscalls_per_op: Some(12.5),
                    dump: "callgrind.out.1".into(),
                    syscall_table: Some("strace.1.txt".into()),
                    parts: BTreeMap::from([
                        ("HTTP/1".into(), per_op * 0.25),
                        ("JSON".into(), per_op * 0.75),
                    ]),
                },
            )]),
        };
        let now = report(150_000.0);
        let alone = now.markdown(None);
        assert!(
            alone.contains(
                "| tools/call modern | 10 | 150000 | 12.5 | callgrind.out.1 | strace.1.txt |"
            ),
            "{alone}"
        );
        assert!(
            alone.contains("| tools/call modern | 37.5 (25 %) | 112.5 (75 %) | 0.0 (0 %) |"),
            "{alone}"
        );
        let compared = now.markdown(Some(&report(200_000.0)));
        assert!(
            compared.contains("| tools/call modern | 200000 | 150000 | 0.750 | 12.5 | 12.5 |"),
            "{compared}"
        );
    }
}
