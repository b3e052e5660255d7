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
/// that matched nothing that ran, `comparisons` (run through the gateway, run without it).
pub(crate) fn render(
    sections: &[(String, String)],
    outcomes: &[Outcome],
    baseline: &Baseline,
    stale: &[&Expected],
    problems: &[String],
    comparisons: &[(String, String)],
) -> (String, Totals) {
    let mut totals = Totals::default();
    let mut body = compare(comparisons, outcomes, baseline, &mut totals);
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

/// The direct-versus-gateway section: per compared pair of runs, every scenario of either with
/// both results. A scenario that passed directly and failed through the gateway is a
/// regression and fails the run (counted here unless its own verdict already failed it, so no
/// failure counts twice), whatever the baseline says.
fn compare(
    comparisons: &[(String, String)],
    outcomes: &[Outcome],
    baseline: &Baseline,
    totals: &mut Totals,
) -> String {
    let mut body = String::new();
    if comparisons.is_empty() {
        return body;
    }
    let _ = writeln!(
        body,
        "\n## Direct vs through the gateway\n\n\
         Each run through the gateway next to the same suite against the same kind of backend \
         alone, in the client's era. **regression**: passes directly, fails through the gateway \
         (fails the run).\n"
    );
    for (via, direct) in comparisons {
        let of = |run: &str, scenario: &str| {
            outcomes
                .iter()
                .find(|o| o.run == run && o.scenario == scenario)
        };
        let mut scenarios: Vec<&str> = outcomes
            .iter()
            .filter(|o| &o.run == via || &o.run == direct)
            .map(|o| o.scenario.as_str())
            .collect();
        scenarios.sort_unstable();
        scenarios.dedup();
        let _ = writeln!(body, "### `{via}` vs `{direct}`\n");
        if scenarios.is_empty() {
            let _ = writeln!(body, "(not run)\n");
            continue;
        }
        let _ = writeln!(
            body,
            "| scenario | direct | through the gateway | comparison |"
        );
        let _ = writeln!(body, "|---|---|---|---|");
        let mut regressions = 0;
        for scenario in scenarios {
            let (there, here) = (of(direct, scenario), of(via, scenario));
            let result = |o: Option<&Outcome>| match o {
                None => "not run".to_owned(),
                Some(o) if !o.scored => format!("not scored ({})", o.summary),
                Some(o) if o.passed => format!("pass ({})", o.summary),
                Some(o) => format!("fail ({})", o.summary),
            };
            let comparison = match (there, here) {
                (Some(d), Some(g)) if d.scored && d.passed && !g.passed => {
                    regressions += 1;
                    if !Verdict::of(g, baseline).fails() {
                        totals.failed += 1;
                    }
                    "**regression**"
                }
                (Some(d), Some(g)) if d.passed == g.passed => "same",
                (Some(_), Some(g)) if g.passed => "better through the gateway",
                _ => "only in one run",
            };
            let _ = writeln!(
                body,
                "| `{scenario}` | {} | {} | {comparison} |",
                cell(&result(there)),
                cell(&result(here))
            );
        }
        let _ = writeln!(body, "\n{regressions} regression(s).\n");
    }
    body
}

/// Text made safe for one Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::{Baseline, Outcome, render};

    fn pair() -> Vec<(String, String)> {
        vec![("s@gateway".to_owned(), "s@direct".to_owned())]
    }

    #[test]
    fn a_scenario_passing_directly_and_failing_through_the_gateway_fails_once() {
        let outcomes = [
            Outcome::new("s@direct", "a", true, "1 passed, 0 failed"),
            Outcome::new("s@gateway", "a", false, "0 passed, 1 failed"),
            Outcome::new("s@direct", "b", false, "0 passed, 1 failed"),
            Outcome::new("s@gateway", "b", false, "0 passed, 1 failed"),
        ];
        let sections = [
            ("s@gateway".to_owned(), "g".to_owned()),
            ("s@direct".to_owned(), "d".to_owned()),
        ];
        // Both failures through the gateway and the direct one are listed as expected: only the
        // regression still fails the run.
        let baseline: Baseline = toml::from_str(
            "[[expected_failure]]\nrun = \"s@gateway\"\nscenario = \"a\"\nreason = \"x\"\n\
             [[expected_failure]]\nrun = \"s@gateway\"\nscenario = \"b\"\nreason = \"x\"\n\
             [[expected_failure]]\nrun = \"s@direct\"\nscenario = \"b\"\nreason = \"x\"\n",
        )
        .expect("valid baseline");
        let (text, totals) = render(&sections, &outcomes, &baseline, &[], &[], &pair());
        assert_eq!(totals.failed, 1, "{text}");
        assert!(
            text.contains(
                "| `a` | pass (1 passed, 0 failed) | fail (0 passed, 1 failed) | **regression** |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| `b` | fail (0 passed, 1 failed) | fail (0 passed, 1 failed) | same |"),
            "{text}"
        );

        // Without the baseline the regression is one failure, not two.
        let (_, totals) = render(
            &sections,
            &outcomes,
            &Baseline::default(),
            &[],
            &[],
            &pair(),
        );
        assert_eq!(totals.failed, 3);
    }
}
