//! The scale curves of a run: `tools/call` throughput and p99 over the client counts (1 to 256
//! in a full run), `tools/list` fan-out latency added over the slowest backend (1 to 64
//! backends), and idle 2025 sessions (10,000 and 100,000): each a [`LineChart`] written beside
//! `REPORT.md` and the same figures as a table in it.

use std::fmt::Write as _;

use crate::plot::{LineChart, Series};
use crate::report::{Comparison, Report};

/// The `tools/call` scenarios the curves follow (the hyper backend: the gateway's own cost
/// shows most sharply there; the rmcp rows are in the closed-loop table).
const CALL_SCENARIOS: [&str; 2] = ["tools/call modern", "tools/call legacy"];

/// Every chart of `report` with the file name it is written to (beside `REPORT.md`).
#[must_use]
pub fn charts(report: &Report) -> Vec<(&'static str, LineChart)> {
    let calls = |y_label: &str, title: &str, value: fn(&crate::stats::Summary) -> f64| {
        let mut series = Vec::new();
        for scenario in CALL_SCENARIOS {
            let rows: Vec<&Comparison> = report
                .tool_calls
                .iter()
                .filter(|c| c.scenario == scenario)
                .collect();
            let era = scenario.trim_start_matches("tools/call ");
            let side = |name: &str, pick: &dyn Fn(&Comparison) -> Option<f64>| Series {
                name: format!("{name} ({era})"),
                points: rows
                    .iter()
                    .filter_map(|c| Some((c.concurrency as f64, pick(c)?)))
                    .collect(),
            };
            series.push(side("gateway", &|c| Some(value(&c.gateway))));
            series.push(side("haproxy", &|c| c.haproxy.as_ref().map(value)));
            series.push(side("direct", &|c| Some(value(&c.direct))));
        }
        series.retain(|s| !s.points.is_empty());
        LineChart {
            title: title.to_owned(),
            x_label: "clients".into(),
            y_label: y_label.to_owned(),
            log_x: true,
            series,
        }
    };
    let fanout = |name: &str, value: fn(&Comparison) -> f64| Series {
        name: name.to_owned(),
        points: report
            .fanout
            .iter()
            .map(|c| (backends(c), value(c)))
            .collect(),
    };
    // Above each gateway's own idle RSS: the larger counts run on a fresh gateway.
    let scale = &report.memory.scale;
    let mut sessions = vec![(0.0, 0.0)];
    sessions.extend(scale.iter().map(|s| {
        (
            s.sessions as f64,
            s.bytes_per_session * s.sessions as f64 / (1024.0 * 1024.0),
        )
    }));
    let all = vec![
        (
            "calls-throughput.svg",
            calls("calls/s", "tools/call throughput by clients", |s| s.rps),
        ),
        (
            "calls-p99.svg",
            calls(
                "p99 latency, µs",
                "tools/call p99 latency by clients",
                |s| s.p99_us,
            ),
        ),
        (
            "fanout-added.svg",
            LineChart {
                title: "tools/list fan-out: latency added over the slowest backend".into(),
                x_label: "backends".into(),
                y_label: "µs".into(),
                log_x: true,
                series: vec![
                    fanout("added p50", |c| c.gateway.p50_us - c.direct.p50_us),
                    fanout("added p99", |c| c.gateway.p99_us - c.direct.p99_us),
                ],
            },
        ),
        (
            "sessions-rss.svg",
            LineChart {
                title: "gateway RSS above idle with idle 2025 sessions open".into(),
                x_label: "sessions".into(),
                y_label: "MiB above idle".into(),
                log_x: false,
                series: vec![Series {
                    name: "RSS above idle".into(),
                    points: if scale.is_empty() {
                        Vec::new()
                    } else {
                        sessions
                    },
                }],
            },
        ),
    ];
    all.into_iter()
        .filter(|(_, chart)| chart.series.iter().any(|s| !s.points.is_empty()))
        .collect()
}

/// The `## Scale curves` section: each chart as an image link and as a table of its points,
/// and the session scale with its opening times.
#[must_use]
pub fn markdown(report: &Report) -> String {
    let charts = charts(report);
    if charts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Scale curves\n\nThe charts are SVG files beside this report; their points in tables.\n\n",
    );
    for (file, chart) in &charts {
        let _ = writeln!(out, "### {}\n\n![{}]({file})\n", chart.title, chart.title);
        out.push_str(&table(chart));
        out.push('\n');
    }
    if !report.memory.scale.is_empty() {
        let _ = writeln!(
            out,
            "### Opening idle 2025 sessions (8 clients)\n\n| sessions | time to open | sessions/s | RSS | bytes per session | RSS after deleting |\n|---:|---:|---:|---:|---:|---:|"
        );
        for s in &report.memory.scale {
            let _ = writeln!(
                out,
                "| {} | {:.2} s | {:.0} | {:.1} MiB | {:.0} | {:.1} MiB |",
                s.sessions,
                s.open_seconds,
                s.sessions as f64 / s.open_seconds.max(f64::MIN_POSITIVE),
                mib(s.rss),
                s.bytes_per_session,
                mib(s.after_delete_rss)
            );
        }
        out.push('\n');
    }
    out
}

/// A chart's points as a table: one row per x, one column per series (`—` where a series has
/// no point).
fn table(chart: &LineChart) -> String {
    let mut out = format!("| {} |", chart.x_label);
    for series in &chart.series {
        let _ = write!(out, " {} |", series.name);
    }
    out.push_str("\n|---:|");
    out.push_str(&"---:|".repeat(chart.series.len()));
    out.push('\n');
    for x in chart.xs() {
        let _ = write!(out, "| {x:.0} |");
        for series in &chart.series {
            match series.points.iter().find(|p| p.0 == x) {
                Some((_, y)) if *y != 0.0 && y.abs() < 10.0 => {
                    let _ = write!(out, " {y:.2} |");
                }
                Some((_, y)) => {
                    let _ = write!(out, " {y:.0} |");
                }
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    out
}

/// The backend count of a fan-out comparison (`tools/list fan-out x16` → 16).
fn backends(c: &Comparison) -> f64 {
    c.scenario
        .rsplit_once('x')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0.0)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::SessionScale;
    use crate::stats::Summary;

    fn summary(rps: f64, p50_us: f64, p99_us: f64) -> Summary {
        Summary {
            rps,
            p50_us,
            p99_us,
            ..Summary::default()
        }
    }

    fn comparison(scenario: &str, clients: usize, gateway: Summary, haproxy: bool) -> Comparison {
        Comparison {
            scenario: scenario.into(),
            concurrency: clients,
            rate: None,
            direct: summary(gateway.rps * 3.0, 50.0, 90.0),
            gateway,
            gateway_cpu_us: None,
            haproxy: haproxy.then(|| summary(gateway.rps * 2.0, 60.0, 100.0)),
            haproxy_cpu_us: None,
            gateway_syscalls: None,
            haproxy_syscalls: None,
            first_error: None,
        }
    }

    #[test]
    fn the_curves_follow_clients_backends_and_sessions() {
        let mut report = Report::default();
        for clients in [1, 4, 256] {
            let rps = 1_000.0 * clients as f64;
            report.tool_calls.push(comparison(
                "tools/call modern",
                clients,
                summary(rps, 100.0, 400.0),
                true,
            ));
        }
        report.tool_calls.push(comparison(
            "tools/call modern (rmcp)",
            1,
            summary(5.0, 1.0, 1.0),
            true,
        ));
        for n in [1, 64] {
            report.fanout.push(comparison(
                &format!("tools/list fan-out x{n}"),
                1,
                summary(100.0, 300.0 + n as f64, 900.0),
                false,
            ));
        }
        report.memory.idle_rss = 20 * 1024 * 1024;
        report.memory.scale = vec![SessionScale {
            sessions: 100_000,
            rss: 420 * 1024 * 1024,
            bytes_per_session: 4194.0,
            open_seconds: 8.0,
            after_delete_rss: 60 * 1024 * 1024,
        }];

        let files: Vec<&str> = charts(&report).iter().map(|(f, _)| *f).collect();
        assert_eq!(
            files,
            [
                "calls-throughput.svg",
                "calls-p99.svg",
                "fanout-added.svg",
                "sessions-rss.svg"
            ]
        );
        let text = markdown(&report);
        // Throughput by clients: the gateway, HAProxy and direct, rmcp rows left out; no
        // legacy rows were measured, so no legacy columns.
        assert!(
            text.contains("| clients | gateway (modern) | haproxy (modern) | direct (modern) |"),
            "{text}"
        );
        assert!(
            text.contains("| 256 | 256000 | 512000 | 768000 |"),
            "{text}"
        );
        assert!(
            !text.contains("(legacy)") && !text.contains("rmcp"),
            "{text}"
        );
        // Fan-out: added p50 = gateway p50 - direct p50 (50 µs).
        assert!(text.contains("| 64 | 314 | 810 |"), "{text}");
        assert!(text.contains("![tools/list fan-out"), "{text}");
        // Sessions: nothing above idle at none, 4,194 B each at 100,000.
        assert!(
            text.contains("| 0 | 0 |") && text.contains("| 100000 | 400 |"),
            "{text}"
        );
        assert!(
            text.contains("| 100000 | 8.00 s | 12500 | 420.0 MiB | 4194 | 60.0 MiB |"),
            "{text}"
        );
    }

    #[test]
    fn a_report_without_curves_has_no_section() {
        assert!(charts(&Report::default()).is_empty());
        assert_eq!(markdown(&Report::default()), "");
    }
}
