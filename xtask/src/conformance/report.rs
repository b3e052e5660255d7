//! `target/conformance/REPORT.md`: the verdict of every scenario and interop cell.

use std::fmt::Write as _;

use super::outcome::{Baseline, Expected, Outcome, Verdict};

/// Counts of one report.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    /// Scored outcomes that passed.
    pub(crate) passed: usize,
    /// Failures not in the baseline, plus stale baseline entries.
    pub(crate) failed: usize,
    /// Failures listed in the baseline.
    pub(crate) expected: usize,
    /// Outcomes the suite reports but does not score.
    pub(crate) not_scored: usize,
}

/// Renders the report; `sections` are (run id, heading) in order, `stale` the baseline entries
/// that matched nothing that ran.
pub(crate) fn render(
    sections: &[(String, String)],
    outcomes: &[Outcome],
    baseline: &Baseline,
    stale: &[&Expected],
    problems: &[String],
) -> (String, Totals) {
    let mut totals = Totals::default();
    let mut body = String::new();
    for (run, heading) in sections {
        let rows: Vec<&Outcome> = outcomes.iter().filter(|o| &o.run == run).collect();
        let _ = writeln!(body, "\n## {heading}\n\nrun id: `{run}`\n");
        if rows.is_empty() {
            let _ = writeln!(body, "(not run: see the problems above)");
            continue;
        }
        let _ = writeln!(
            body,
            "| scenario | result | checks | reason / failed checks |"
        );
        let _ = writeln!(body, "|---|---|---|---|");
        for outcome in rows {
            let verdict = Verdict::of(outcome, baseline);
            match verdict {
                _ if verdict.fails() => totals.failed += 1,
                Verdict::Pass => totals.passed += 1,
                Verdict::ExpectedFailure => totals.expected += 1,
                _ => totals.not_scored += 1,
            }
            let why = match (verdict, baseline.find(outcome)) {
                (Verdict::ExpectedFailure | Verdict::StalePass, Some(entry)) => {
                    format!("baseline: {}", entry.reason)
                }
                _ => String::new(),
            };
            let why = [why.as_str(), outcome.note.as_str(), outcome.detail.as_str()]
                .iter()
                .filter(|part| !part.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" — ");
            let _ = writeln!(
                body,
                "| `{}` | {} | {} | {} |",
                outcome.scenario,
                verdict.label(),
                cell(&outcome.summary),
                cell(&why)
            );
        }
    }
    totals.failed += stale.len() + problems.len();

    let mut report = String::from(
        "# Conformance report\n\n\
         Written by `cargo xtask conformance` (see the README's Conformance section). \
         Results: **pass**; **expected failure** (listed in `tests/conformance/baseline.toml` \
         with the reason shown); **FAIL** (a failure not in the baseline: the run fails); \
         **stale baseline entry** (listed but passing or not found: the run fails until the entry \
         is removed); **not scored** (the suite runs and reports it, but it is not required by \
         that revision: extensions, pending and added-after-release scenarios). Runs ending in \
         `@gateway` go through the gateway binary, `@direct` go to the backend alone, so a \
         failure can be blamed on one or the other.\n\n",
    );
    let _ = writeln!(
        report,
        "**{} passed, {} failed**, {} expected failures, {} not scored.",
        totals.passed, totals.failed, totals.expected, totals.not_scored
    );
    if !problems.is_empty() || !stale.is_empty() {
        let _ = writeln!(report, "\n## Problems\n");
        for problem in problems {
            let _ = writeln!(report, "- {}", cell(problem));
        }
        for entry in stale {
            let _ = writeln!(
                report,
                "- stale baseline entry: `{}` / `{}` matched nothing that ran",
                entry.run, entry.scenario
            );
        }
    }
    report.push_str(&body);
    (report, totals)
}

/// Text made safe for one Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}
