//! Running the official conformance suite (`@modelcontextprotocol/conformance`) against a server
//! URL and reading its verdict per scenario.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::install::Peers;
use super::outcome::Outcome;
use super::process;

/// Longest run of one suite invocation (it has its own 30 s per-scenario timeout).
const SUITE_TIMEOUT: Duration = Duration::from_secs(600);

/// One invocation of the suite: which release, with which arguments.
pub(crate) struct Suite {
    /// Short name used in run ids (`suite-0.1.16`, `suite-0.2-2026-07-28`).
    pub(crate) name: &'static str,
    /// The npm alias the release is installed under (`tests/conformance/node/package.json`).
    pub(crate) package: &'static str,
    /// Extra arguments after `server --url URL`.
    pub(crate) args: &'static [&'static str],
    /// Whether it tests the 2025 (session) revisions.
    pub(crate) legacy: bool,
}

/// The suites run against the gateway and against the backend alone.
pub(crate) const SUITES: [Suite; 3] = [
    Suite {
        name: "suite-0.1.16",
        package: "conformance-legacy",
        args: &[],
        legacy: true,
    },
    Suite {
        name: "suite-0.2-2025-11-25",
        package: "conformance-next",
        args: &["--requirements", "2025-11-25"],
        legacy: true,
    },
    Suite {
        name: "suite-0.2-2026-07-28",
        package: "conformance-next",
        args: &["--requirements", "2026-07-28"],
        legacy: false,
    },
];

/// Runs `suite` against `url`; `run` names the outcomes (e.g. `suite-0.1.16@gateway`). The
/// suite's own output goes to `out_dir` (`-o`) and `out_dir/stdout.txt`.
pub(crate) fn run(
    peers: &Peers,
    suite: &Suite,
    run: &str,
    url: &str,
    out_dir: &Path,
) -> Result<Vec<Outcome>, String> {
    if out_dir.exists() {
        std::fs::remove_dir_all(out_dir)
            .map_err(|e| format!("cannot clear {}: {e}", out_dir.display()))?;
    }
    std::fs::create_dir_all(out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    println!("xtask: conformance {run}: {url}");
    let mut command = Command::new(&peers.node);
    command
        .arg(peers.package(suite.package, "dist/index.js"))
        .args(["server", "--url", url])
        .args(suite.args)
        .arg("-o")
        .arg(out_dir)
        .current_dir(&peers.project);
    let (_, stdout, stderr) = process::output_within(run, command, SUITE_TIMEOUT)?;
    let log = out_dir.join("stdout.txt");
    std::fs::write(&log, format!("{stdout}\n--- stderr ---\n{stderr}"))
        .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let mut outcomes = parse_summary(run, &stdout);
    if outcomes.is_empty() {
        return Err(format!(
            "conformance {run}: no scenario summary in the suite's output (see {})",
            log.display()
        ));
    }
    for outcome in outcomes.iter_mut().filter(|o| !o.passed) {
        outcome.detail = failed_checks(out_dir, &outcome.scenario);
    }
    Ok(outcomes)
}

/// Reads the `=== SUMMARY ===` section: `✓ name: 3 passed, 0 failed` per scenario, then (0.2)
/// `Not scored for <revision>: ...` followed by `  ✗ name (extension)` lines.
fn parse_summary(run: &str, stdout: &str) -> Vec<Outcome> {
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut in_summary = false;
    let mut in_not_scored = false;
    for line in stdout.lines() {
        if line.starts_with("=== SUMMARY ===") {
            in_summary = true;
            continue;
        }
        if !in_summary {
            continue;
        }
        if line.starts_with("Not scored for") {
            in_not_scored = true;
            continue;
        }
        let trimmed = line.trim_start();
        let Some(rest) = trimmed
            .strip_prefix("✓ ")
            .or_else(|| trimmed.strip_prefix("✗ "))
        else {
            continue;
        };
        if in_not_scored {
            // `name (why it is not scored)`
            let (name, why) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(outcome) = outcomes.iter_mut().find(|o| o.scenario == name) {
                let why = why.trim().trim_start_matches('(').trim_end_matches(')');
                outcome.scored = false;
                outcome.note = format!("not scored for this revision ({why})");
            }
            continue;
        }
        let Some((name, counts)) = rest.split_once(": ") else {
            continue;
        };
        let failed = counts
            .split(", ")
            .find_map(|part| part.strip_suffix(" failed"))
            .and_then(|n| n.trim().parse::<u32>().ok());
        let Some(failed) = failed else { continue };
        outcomes.push(Outcome::new(run, name, failed == 0, counts.trim()));
    }
    outcomes
}

/// The failing checks of `scenario` (id: message), from the suite's `-o` folder.
fn failed_checks(out_dir: &Path, scenario: &str) -> String {
    let prefix = format!("server-{scenario}-");
    let Ok(entries) = std::fs::read_dir(out_dir) else {
        return String::new();
    };
    let mut messages = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // The folder is `server-<scenario>-<timestamp>`: a digit must follow the prefix, so
        // `tools-call` never picks up `tools-call-image`.
        let Some(stamp) = name.strip_prefix(&prefix) else {
            continue;
        };
        if !stamp.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let Ok(serde_json::Value::Array(checks)) = serde_json::from_str(&text) else {
            continue;
        };
        for check in checks {
            if check["status"] == "FAILURE" {
                messages.push(format!(
                    "{}: {}",
                    check["id"].as_str().unwrap_or("?"),
                    check["errorMessage"].as_str().unwrap_or("")
                ));
            }
        }
    }
    messages.join("; ")
}

#[cfg(test)]
mod tests {
    use super::parse_summary;

    #[test]
    fn the_summary_gives_one_outcome_per_scenario_and_marks_the_unscored() {
        let stdout = "=== Running scenario: ping ===\n✓ not-a-summary: 1 passed, 0 failed\n\
                      === SUMMARY ===\n✓ ping: 2 passed, 0 failed\n✗ tasks-lifecycle: 2 passed, \
                      7 failed\n\nTotal: 4 passed, 7 failed\n\nNot scored for 2026-07-28: 1 \
                      scenario(s) run, 1 failing.\n  ✗ tasks-lifecycle (extension)\n";
        let outcomes = parse_summary("r", stdout);
        assert_eq!(outcomes.len(), 2, "{outcomes:?}");
        assert!(outcomes[0].passed && outcomes[0].scored);
        assert_eq!(outcomes[0].scenario, "ping");
        assert!(!outcomes[1].passed && !outcomes[1].scored);
        assert!(outcomes[1].note.contains("extension"), "{outcomes:?}");
    }
}
