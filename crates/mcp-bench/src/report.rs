//! [`Report`]: what a benchmark run measured, as JSON (for `--baseline` comparisons) and as
//! Markdown (`REPORT.md`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::stats::Summary;

/// Where and how the run happened.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Meta {
    /// UTC time the run started, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    /// Logical CPUs available.
    pub cores: usize,
    /// `model name` of `/proc/cpuinfo`.
    pub cpu: String,
    /// The source revision measured, when known.
    pub git_rev: Option<String>,
    /// The gateway's `runtime.mode` (empty in reports from before it was recorded: the
    /// default, work-stealing).
    #[serde(default)]
    pub runtime: String,
    /// Whether this was the `--quick` smoke version.
    pub quick: bool,
    /// A/B rounds per comparison.
    pub rounds: usize,
    /// Measured seconds per side and round.
    pub seconds_per_run: f64,
}

/// One A/B comparison: direct to the backend vs through the gateway (and, for `tools/call`,
/// through HAProxy in front of the same backend: the floor any proxy costs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    /// What was measured, e.g. `tools/call modern`.
    pub scenario: String,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Open-loop arrival rate (iterations/s), `None` for closed loop.
    pub rate: Option<f64>,
    /// Direct to the backend(s).
    pub direct: Summary,
    /// Through the gateway.
    pub gateway: Summary,
    /// Gateway CPU time per iteration in microseconds (`/proc/<pid>/stat`).
    pub gateway_cpu_us: Option<f64>,
    /// Through HAProxy (`tools/call` scenarios; `None` elsewhere and when haproxy is missing).
    #[serde(default)]
    pub haproxy: Option<Summary>,
    /// HAProxy CPU time per iteration in microseconds (`/proc/<pid>/stat`).
    #[serde(default)]
    pub haproxy_cpu_us: Option<f64>,
    /// `--profile`: gateway system calls per iteration (`strace -c -f`, one extra run).
    #[serde(default)]
    pub gateway_syscalls: Option<f64>,
    /// `--profile`: HAProxy system calls per iteration (`strace -c -f`, one extra run).
    #[serde(default)]
    pub haproxy_syscalls: Option<f64>,
    /// The first failure seen, if any.
    pub first_error: Option<String>,
}

impl Comparison {
    /// Gateway throughput / direct throughput.
    #[must_use]
    pub fn ratio(&self) -> f64 {
        if self.direct.rps > 0.0 {
            self.gateway.rps / self.direct.rps
        } else {
            0.0
        }
    }

    /// HAProxy throughput / direct throughput.
    #[must_use]
    pub fn haproxy_ratio(&self) -> Option<f64> {
        let haproxy = self.haproxy.as_ref()?;
        (self.direct.rps > 0.0).then(|| haproxy.rps / self.direct.rps)
    }

    /// Gateway throughput / HAProxy throughput: how close the gateway comes to the floor.
    #[must_use]
    pub fn vs_haproxy(&self) -> Option<f64> {
        let haproxy = self.haproxy.as_ref()?;
        (haproxy.rps > 0.0).then(|| self.gateway.rps / haproxy.rps)
    }

    /// Gateway p50 minus direct p50, µs.
    #[must_use]
    pub fn added_p50(&self) -> f64 {
        self.gateway.p50_us - self.direct.p50_us
    }

    /// HAProxy p50 minus direct p50, µs.
    #[must_use]
    pub fn haproxy_added_p50(&self) -> Option<f64> {
        Some(self.haproxy.as_ref()?.p50_us - self.direct.p50_us)
    }
}

/// Gateway memory figures (bytes).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Memory {
    /// RSS after start and one warm-up request per virtual host.
    pub idle_rss: u64,
    /// Legacy sessions opened (initialize + initialized, not deleted).
    pub sessions: usize,
    /// RSS with those sessions open.
    pub sessions_rss: u64,
    /// (sessions_rss - idle_rss) / sessions.
    pub bytes_per_session: f64,
    /// RSS after deleting them.
    pub after_delete_rss: u64,
    /// Largest RSS sampled during the load runs.
    pub load_max_rss: u64,
    /// RSS at the end of the run.
    pub end_rss: u64,
    /// Idle legacy sessions at each count of the run (10,000 and 100,000 in a full run): the
    /// first on the main gateway before the load runs, the others on a fresh gateway after
    /// them, each against that gateway's idle RSS.
    #[serde(default)]
    pub scale: Vec<SessionScale>,
}

/// Idle legacy sessions at one count: the session scale curve's point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionScale {
    /// Sessions opened (initialize + initialized, not deleted until measured).
    pub sessions: usize,
    /// Gateway RSS with them open (bytes).
    pub rss: u64,
    /// (rss - idle RSS) / sessions.
    pub bytes_per_session: f64,
    /// Seconds 8 clients took to open them.
    pub open_seconds: f64,
    /// Gateway RSS after deleting them (bytes).
    pub after_delete_rss: u64,
}

/// One session store's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoreRun {
    /// `local`, `redis` or `sealed`.
    pub kind: String,
    /// Legacy session cycles (initialize + initialized + DELETE).
    pub setup: Summary,
    /// Gateway CPU per session cycle, µs.
    pub setup_cpu_us: Option<f64>,
    /// Legacy `tools/call` in an open session.
    pub call: Summary,
    /// Gateway CPU per call, µs.
    pub call_cpu_us: Option<f64>,
    /// The first failure seen, if any.
    pub first_error: Option<String>,
}

/// Modern `tools/call` through a gateway running a number of plugins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PluginRun {
    /// How many plugins govern the call.
    pub plugins: usize,
    /// `tools/call`, 16 clients.
    pub call: Summary,
    /// Gateway CPU per call, µs.
    pub call_cpu_us: Option<f64>,
    /// The first failure seen, if any.
    pub first_error: Option<String>,
}

/// One comparable figure: the flat form `--baseline` compares.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// Whether a larger value is an improvement.
    pub higher_is_better: bool,
}

/// Everything one run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// Where and how.
    pub meta: Meta,
    /// Closed-loop `tools/call`, both eras, each concurrency.
    pub tool_calls: Vec<Comparison>,
    /// Open-loop `tools/call` at a fixed rate.
    pub open_loop: Vec<Comparison>,
    /// `tools/list` fan-out: the client's own concurrent fan-out vs the gateway's.
    pub fanout: Vec<Comparison>,
    /// Legacy session setup and `server/discover` rates.
    pub rates: Vec<Comparison>,
    /// Gateway memory.
    pub memory: Memory,
    /// Local vs Redis vs sealed session stores.
    pub session_stores: Vec<StoreRun>,
    /// `tools/call` with 0, 1 and 5 plugins.
    #[serde(default)]
    pub plugins: Vec<PluginRun>,
    /// Notes (skipped parts and why).
    pub notes: Vec<String>,
    /// The flat figures, filled by [`Report::finish`].
    pub metrics: BTreeMap<String, Metric>,
}

/// A metric name part: ASCII letters and digits, every other run of characters one `_`
/// (`tools/call modern (rmcp)` → `tools_call_modern_rmcp`).
fn key(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_owned()
}

impl Report {
    /// Fills [`metrics`](Self::metrics) from the sections.
    pub fn finish(&mut self) {
        let mut m = BTreeMap::new();
        let mut put = |name: String, value: f64, unit: &str, higher: bool| {
            m.insert(
                name,
                Metric {
                    value,
                    unit: unit.to_owned(),
                    higher_is_better: higher,
                },
            );
        };
        for c in self
            .tool_calls
            .iter()
            .chain(&self.open_loop)
            .chain(&self.fanout)
            .chain(&self.rates)
        {
            let base = format!("{}.c{}", key(&c.scenario), c.concurrency);
            if c.rate.is_none() {
                put(format!("{base}.gateway.rps"), c.gateway.rps, "1/s", true);
                put(format!("{base}.ratio"), c.ratio(), "x", true);
            }
            put(format!("{base}.gateway.p50"), c.gateway.p50_us, "us", false);
            put(format!("{base}.gateway.p99"), c.gateway.p99_us, "us", false);
            put(format!("{base}.added.p50"), c.added_p50(), "us", false);
            if let Some(cpu) = c.gateway_cpu_us {
                put(format!("{base}.gateway.cpu_per_op"), cpu, "us", false);
            }
            if let Some(haproxy) = &c.haproxy {
                put(format!("{base}.haproxy.rps"), haproxy.rps, "1/s", true);
                put(format!("{base}.haproxy.p50"), haproxy.p50_us, "us", false);
            }
            if let Some(ratio) = c.haproxy_ratio() {
                put(format!("{base}.haproxy.ratio"), ratio, "x", true);
            }
            if let Some(ratio) = c.vs_haproxy() {
                put(format!("{base}.vs_haproxy"), ratio, "x", true);
            }
            if let Some(added) = c.haproxy_added_p50() {
                put(format!("{base}.haproxy.added.p50"), added, "us", false);
            }
            if let Some(cpu) = c.haproxy_cpu_us {
                put(format!("{base}.haproxy.cpu_per_op"), cpu, "us", false);
            }
            if let Some(calls) = c.gateway_syscalls {
                put(format!("{base}.gateway.syscalls_per_op"), calls, "1", false);
            }
            if let Some(calls) = c.haproxy_syscalls {
                put(format!("{base}.haproxy.syscalls_per_op"), calls, "1", false);
            }
        }
        let mem = &self.memory;
        put("memory.idle_rss".into(), mem.idle_rss as f64, "B", false);
        put(
            "memory.bytes_per_session".into(),
            mem.bytes_per_session,
            "B",
            false,
        );
        put(
            "memory.load_max_rss".into(),
            mem.load_max_rss as f64,
            "B",
            false,
        );
        for s in &self.session_stores {
            let base = format!("session_store.{}", s.kind);
            put(format!("{base}.setup.rps"), s.setup.rps, "1/s", true);
            put(format!("{base}.call.rps"), s.call.rps, "1/s", true);
            put(format!("{base}.call.p50"), s.call.p50_us, "us", false);
        }
        for p in &self.plugins {
            let base = format!("plugins.{}", p.plugins);
            put(format!("{base}.call.rps"), p.call.rps, "1/s", true);
            put(format!("{base}.call.p50"), p.call.p50_us, "us", false);
            if let Some(cpu) = p.call_cpu_us {
                put(format!("{base}.call.cpu_per_op"), cpu, "us", false);
            }
        }
        self.metrics = m;
    }

    /// `REPORT.md`.
    #[must_use]
    pub fn markdown(&self, baseline: Option<&Report>) -> String {
        let mut out = String::new();
        let meta = &self.meta;
        let _ = writeln!(out, "# mcp-gateway benchmark\n");
        let _ = writeln!(
            out,
            "{} UTC, {} cores ({}), revision {}, gateway runtime `{}`, {} run: {} A/B round(s) of {:.1} s per side.\n",
            meta.date,
            meta.cores,
            meta.cpu,
            meta.git_rev.as_deref().unwrap_or("unknown"),
            if meta.runtime.is_empty() {
                "work-stealing"
            } else {
                &meta.runtime
            },
            if meta.quick { "`--quick`" } else { "full" },
            meta.rounds,
            meta.seconds_per_run
        );
        let _ = writeln!(
            out,
            "Direct = the load generator straight to the echo backend(s); gateway = the same \
             requests through the release `mcp-gateway` process (HS256 JWT verified on every \
             request, file config store, access log off). Latencies in µs; \"added\" is gateway \
             minus direct; CPU is the gateway process's user+system time per iteration.\n"
        );
        comparison_table(&mut out, "## tools/call, closed loop", &self.tool_calls);
        floor_table(&mut out, &self.tool_calls);
        comparison_table(
            &mut out,
            "## tools/call, open loop (latency from the intended send time)",
            &self.open_loop,
        );
        comparison_table(
            &mut out,
            "## tools/list fan-out (direct = the client lists every backend at once: the slowest backend)",
            &self.fanout,
        );
        comparison_table(&mut out, "## Setup and discovery rates", &self.rates);
        let mem = &self.memory;
        let _ = writeln!(out, "## Gateway memory (RSS)\n");
        let _ = writeln!(out, "| state | RSS |\n|---|---:|");
        let _ = writeln!(out, "| idle (after warm-up) | {} |", mib(mem.idle_rss));
        let _ = writeln!(
            out,
            "| {} open legacy sessions | {} ({:.0} B per session) |",
            mem.sessions,
            mib(mem.sessions_rss),
            mem.bytes_per_session
        );
        let _ = writeln!(
            out,
            "| after deleting them | {} |",
            mib(mem.after_delete_rss)
        );
        let _ = writeln!(out, "| largest under load | {} |", mib(mem.load_max_rss));
        let _ = writeln!(out, "| end of run | {} |\n", mib(mem.end_rss));
        if !self.session_stores.is_empty() {
            let _ = writeln!(out, "## Session stores (legacy clients)\n");
            let _ = writeln!(
                out,
                "| store | session cycles/s | cycle p50 | cycle p99 | CPU/cycle | calls/s | call p50 | call p99 | CPU/call | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for s in &self.session_stores {
                let _ = writeln!(
                    out,
                    "| {} | {:.0} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {} | {} |",
                    s.kind,
                    s.setup.rps,
                    s.setup.p50_us,
                    s.setup.p99_us,
                    opt_us(s.setup_cpu_us),
                    s.call.rps,
                    s.call.p50_us,
                    s.call.p99_us,
                    opt_us(s.call_cpu_us),
                    s.setup.errors + s.call.errors
                );
            }
            out.push('\n');
        }
        if !self.plugins.is_empty() {
            let _ = writeln!(out, "## Plugins (modern tools/call, 16 clients)\n");
            let _ = writeln!(
                out,
                "| plugins | calls/s | p50 | p99 | CPU/call | errors |\n|---:|---:|---:|---:|---:|---:|"
            );
            for p in &self.plugins {
                let _ = writeln!(
                    out,
                    "| {} | {:.0} | {:.0} | {:.0} | {} | {} |",
                    p.plugins,
                    p.call.rps,
                    p.call.p50_us,
                    p.call.p99_us,
                    opt_us(p.call_cpu_us),
                    p.call.errors
                );
            }
            out.push('\n');
        }
        out.push_str(&crate::curves::markdown(self));
        let errors: Vec<&str> = self
            .tool_calls
            .iter()
            .chain(&self.open_loop)
            .chain(&self.fanout)
            .chain(&self.rates)
            .filter_map(|c| c.first_error.as_deref())
            .chain(
                self.session_stores
                    .iter()
                    .filter_map(|s| s.first_error.as_deref()),
            )
            .chain(self.plugins.iter().filter_map(|p| p.first_error.as_deref()))
            .collect();
        if !errors.is_empty() || !self.notes.is_empty() {
            let _ = writeln!(out, "## Notes\n");
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
            for e in errors {
                let _ = writeln!(out, "- first error: `{e}`");
            }
            out.push('\n');
        }
        if let Some(base) = baseline {
            let _ = writeln!(
                out,
                "## Against the baseline ({}, revision {})\n",
                base.meta.date,
                base.meta.git_rev.as_deref().unwrap_or("unknown")
            );
            out.push_str(&self.compare(base));
        }
        out
    }

    /// A Markdown table of every metric both runs have: baseline, now, now/baseline, and
    /// whether that is better.
    #[must_use]
    pub fn compare(&self, baseline: &Report) -> String {
        let mut out = String::from(
            "| metric | baseline | now | now/baseline | |\n|---|---:|---:|---:|---|\n",
        );
        for (name, now) in &self.metrics {
            let Some(before) = baseline.metrics.get(name) else {
                continue;
            };
            let ratio = if before.value != 0.0 {
                now.value / before.value
            } else {
                f64::NAN
            };
            let verdict = if !ratio.is_finite() || (0.95..=1.05).contains(&ratio) {
                "≈"
            } else if (ratio > 1.0) == now.higher_is_better {
                "better"
            } else {
                "worse"
            };
            let _ = writeln!(
                out,
                "| {name} | {:.2} {unit} | {:.2} {unit} | {ratio:.3} | {verdict} |",
                before.value,
                now.value,
                unit = now.unit
            );
        }
        out
    }
}

fn comparison_table(out: &mut String, title: &str, rows: &[Comparison]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "{title}\n");
    let _ = writeln!(
        out,
        "| scenario | clients | direct/s | gateway/s | ratio | direct p50 | gateway p50 | added p50 | direct p99 | gateway p99 | added p99 | gateway p999 | CPU/op | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for c in rows {
        let scenario = match c.rate {
            Some(rate) => format!("{} @ {rate:.0}/s", c.scenario),
            None => c.scenario.clone(),
        };
        let _ = writeln!(
            out,
            "| {scenario} | {} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} | {:+.0} | {:.0} | {:.0} | {:+.0} | {:.0} | {} | {} |",
            c.concurrency,
            c.direct.rps,
            c.gateway.rps,
            c.ratio(),
            c.direct.p50_us,
            c.gateway.p50_us,
            c.added_p50(),
            c.direct.p99_us,
            c.gateway.p99_us,
            c.gateway.p99_us - c.direct.p99_us,
            c.gateway.p999_us,
            opt_us(c.gateway_cpu_us),
            c.direct.errors + c.gateway.errors
        );
    }
    out.push('\n');
}

/// The gateway against HAProxy in front of the same backend, for the rows that have it.
fn floor_table(out: &mut String, rows: &[Comparison]) {
    let rows: Vec<&Comparison> = rows.iter().filter(|c| c.haproxy.is_some()).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## tools/call: the gateway against HAProxy (the floor)\n\n\
         ours = through the gateway; haproxy = through HAProxy (HTTP/1.1 reverse proxy, 2 threads, \
         keep-alive) in front of the same backend. Ratios are throughputs; added p50 is each \
         side's p50 minus direct's; CPU and syscalls are the process's own per call (syscalls \
         only with `--profile`: `strace -c -f`, every syscall, one extra unmeasured run).\n"
    );
    let _ = writeln!(
        out,
        "| scenario | clients | direct/s | ours/s | haproxy/s | ours/direct | haproxy/direct | ours/haproxy | added p50 ours | added p50 haproxy | CPU/call ours | CPU/call haproxy | syscalls/call ours | syscalls/call haproxy | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for c in rows {
        let haproxy = c.haproxy.unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {} | {} | {:+.0} | {} | {} | {} | {} | {} | {} |",
            c.scenario,
            c.concurrency,
            c.direct.rps,
            c.gateway.rps,
            haproxy.rps,
            c.ratio(),
            opt(c.haproxy_ratio(), 2),
            opt(c.vs_haproxy(), 2),
            c.added_p50(),
            c.haproxy_added_p50()
                .map_or_else(|| "n/a".to_owned(), |v| format!("{v:+.0}")),
            opt_us(c.gateway_cpu_us),
            opt_us(c.haproxy_cpu_us),
            opt(c.gateway_syscalls, 1),
            opt(c.haproxy_syscalls, 1),
            c.direct.errors + c.gateway.errors + haproxy.errors
        );
    }
    out.push('\n');
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
}

fn opt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0} µs"))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comparison(rps: f64) -> Comparison {
        Comparison {
            scenario: "tools/call modern".into(),
            concurrency: 16,
            rate: None,
            direct: Summary {
                rps: 2.0 * rps,
                p50_us: 50.0,
                ..Summary::default()
            },
            gateway: Summary {
                rps,
                p50_us: 150.0,
                ..Summary::default()
            },
            gateway_cpu_us: Some(80.0),
            haproxy: None,
            haproxy_cpu_us: None,
            gateway_syscalls: None,
            haproxy_syscalls: None,
            first_error: None,
        }
    }

    /// `comparison(rps)` with HAProxy at 1.5 × `rps` (p50 90 µs, 20 µs of CPU) and syscall
    /// counts.
    fn with_haproxy(rps: f64) -> Comparison {
        Comparison {
            haproxy: Some(Summary {
                rps: 1.5 * rps,
                p50_us: 90.0,
                errors: 1,
                ..Summary::default()
            }),
            haproxy_cpu_us: Some(20.0),
            gateway_syscalls: Some(7.5),
            haproxy_syscalls: Some(4.3),
            ..comparison(rps)
        }
    }

    #[test]
    fn metric_keys_collapse_separators() {
        assert_eq!(key("tools/call modern"), "tools_call_modern");
        assert_eq!(key("tools/call modern (rmcp)"), "tools_call_modern_rmcp");
        assert_eq!(key("tools/list fan-out x4"), "tools_list_fan_out_x4");
    }

    #[test]
    fn haproxy_figures_become_ratios_metrics_and_a_floor_table() {
        let c = with_haproxy(1000.0);
        assert_eq!(c.ratio(), 0.5);
        assert_eq!(c.haproxy_ratio(), Some(0.75));
        assert_eq!(c.vs_haproxy(), Some(1000.0 / 1500.0));
        assert_eq!(c.added_p50(), 100.0);
        assert_eq!(c.haproxy_added_p50(), Some(40.0));
        assert_eq!(comparison(1000.0).vs_haproxy(), None);

        let mut report = Report::default();
        report.tool_calls.push(c);
        report.tool_calls.push(Comparison {
            scenario: "tools/call modern (rmcp)".into(),
            ..comparison(500.0)
        });
        report.finish();
        let m = &report.metrics;
        assert_eq!(m["tools_call_modern.c16.haproxy.rps"].value, 1500.0);
        assert_eq!(m["tools_call_modern.c16.haproxy.ratio"].value, 0.75);
        assert_eq!(m["tools_call_modern.c16.haproxy.added.p50"].value, 40.0);
        assert_eq!(m["tools_call_modern.c16.haproxy.cpu_per_op"].value, 20.0);
        assert_eq!(
            m["tools_call_modern.c16.gateway.syscalls_per_op"].value,
            7.5
        );
        assert_eq!(
            m["tools_call_modern.c16.haproxy.syscalls_per_op"].value,
            4.3
        );
        assert!(m["tools_call_modern.c16.vs_haproxy"].higher_is_better);
        assert!(m.contains_key("tools_call_modern_rmcp.c16.ratio"));
        assert!(!m.contains_key("tools_call_modern_rmcp.c16.vs_haproxy"));

        let md = report.markdown(None);
        assert!(
            md.contains("## tools/call: the gateway against HAProxy"),
            "{md}"
        );
        assert!(
            md.contains("| ours/direct | haproxy/direct | ours/haproxy | added p50 ours |"),
            "{md}"
        );
        // Only the row measured through HAProxy is in the floor table.
        assert!(
            md.contains(
                "| tools/call modern | 16 | 2000 | 1000 | 1500 | 0.50 | 0.75 | 0.67 | +100 | +40 \
                 | 80 µs | 20 µs | 7.5 | 4.3 | 1 |"
            ),
            "{md}"
        );
        assert_eq!(
            md.matches("| tools/call modern (rmcp) |").count(),
            1,
            "{md}"
        );
    }

    #[test]
    fn a_baseline_without_haproxy_fields_still_compares() {
        let mut now = Report::default();
        now.tool_calls.push(with_haproxy(1000.0));
        now.finish();
        let mut old = serde_json::to_value(&now).expect("serialise");
        for field in [
            "haproxy",
            "haproxy_cpu_us",
            "gateway_syscalls",
            "haproxy_syscalls",
        ] {
            old["tool_calls"][0]
                .as_object_mut()
                .expect("a comparison object")
                .remove(field);
        }
        old["metrics"]
            .as_object_mut()
            .expect("the metrics object")
            .retain(|name, _| !name.contains("haproxy") && !name.contains("syscalls"));
        let old: Report = serde_json::from_value(old).expect("an older report parses");
        assert_eq!(old.tool_calls[0].haproxy, None);
        let table = now.compare(&old);
        assert!(table.contains("| tools_call_modern.c16.ratio |"), "{table}");
        assert!(!table.contains("haproxy"), "{table}");
    }

    #[test]
    fn metrics_are_flat_and_compared_by_direction() {
        let mut before = Report::default();
        before.tool_calls.push(comparison(1000.0));
        before.finish();
        let mut now = Report::default();
        now.tool_calls.push(comparison(2000.0));
        now.finish();
        assert_eq!(now.metrics["tools_call_modern.c16.ratio"].value, 0.5);
        assert_eq!(now.metrics["tools_call_modern.c16.added.p50"].value, 100.0);
        let table = now.compare(&before);
        assert!(
            table.contains(
                "| tools_call_modern.c16.gateway.rps | 1000.00 1/s | 2000.00 1/s | 2.000 | better |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| tools_call_modern.c16.ratio | 0.50 x | 0.50 x | 1.000 | ≈ |"),
            "{table}"
        );
        let json = serde_json::to_string(&now).expect("serialise");
        let back: Report = serde_json::from_str(&json).expect("parse");
        assert_eq!(back.metrics, now.metrics);
        assert!(
            now.markdown(Some(&before))
                .contains("## Against the baseline")
        );
    }
}
