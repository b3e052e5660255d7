//! Outcomes of scenarios and cells, the expected-failures baseline, and the verdict.
//!
//! `tests/conformance/baseline.toml` lists expected failures, each with a written reason:
//!
//! ```toml
//! [[expected_failure]]
//! run = "suite-0.2-2026-07-28@gateway"
//! scenario = "caching"
//! reason = "why it fails and whose limitation it is"
//! ```
//!
//! A failure not listed fails the run; so does a listed entry that now passes or names nothing
//! that ran (a stale entry), so the baseline never outlives the problem it records.

use std::path::Path;

use serde::Deserialize;

/// What one scenario (or interop cell) of one run came to.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Where it ran: `<suite or matrix>@<target>`, e.g. `suite-0.1.16@gateway`.
    pub(crate) run: String,
    /// The scenario or cell name.
    pub(crate) scenario: String,
    /// Whether it passed.
    pub(crate) passed: bool,
    /// Whether it counts (the suite runs and reports extension and pending scenarios too but
    /// does not score them for a revision).
    pub(crate) scored: bool,
    /// The suite's counts, or what a cell checked.
    pub(crate) summary: String,
    /// On failure: the failed checks.
    pub(crate) detail: String,
    /// Why it does not count, when it does not.
    pub(crate) note: String,
}

impl Outcome {
    /// A scored outcome.
    pub(crate) fn new(run: &str, scenario: &str, passed: bool, summary: &str) -> Self {
        Self {
            run: run.to_owned(),
            scenario: scenario.to_owned(),
            passed,
            scored: true,
            summary: summary.to_owned(),
            detail: String::new(),
            note: String::new(),
        }
    }
}

/// `tests/conformance/baseline.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Baseline {
    /// The expected failures.
    #[serde(default)]
    pub(crate) expected_failure: Vec<Expected>,
}

/// One expected failure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Expected {
    /// The run id (`Outcome::run`).
    pub(crate) run: String,
    /// The scenario or cell (`Outcome::scenario`).
    pub(crate) scenario: String,
    /// Why it fails, and whose limitation it is.
    pub(crate) reason: String,
}

impl Baseline {
    /// Reads and checks the file (every entry needs a non-empty reason).
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let baseline: Self =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(entry) = baseline
            .expected_failure
            .iter()
            .find(|entry| entry.reason.trim().is_empty())
        {
            return Err(format!(
                "{}: the entry for {} / {} has no reason",
                path.display(),
                entry.run,
                entry.scenario
            ));
        }
        Ok(baseline)
    }

    /// The entry for an outcome, if any.
    pub(crate) fn find(&self, outcome: &Outcome) -> Option<&Expected> {
        self.expected_failure
            .iter()
            .find(|entry| entry.run == outcome.run && entry.scenario == outcome.scenario)
    }
}

/// How one outcome is judged against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Passed, not in the baseline.
    Pass,
    /// Failed and listed in the baseline.
    ExpectedFailure,
    /// Failed and not listed: fails the run.
    Fail,
    /// Passed but listed in the baseline: the entry is stale, which fails the run.
    StalePass,
    /// Run and reported by the suite but not scored for its revision: never fails the run.
    NotScored,
}

impl Verdict {
    /// Judges `outcome`.
    pub(crate) fn of(outcome: &Outcome, baseline: &Baseline) -> Self {
        let listed = baseline.find(outcome).is_some();
        match (outcome.scored, outcome.passed, listed) {
            (false, _, false) => Self::NotScored,
            (_, true, false) => Self::Pass,
            (_, true, true) => Self::StalePass,
            (_, false, true) => Self::ExpectedFailure,
            (true, false, false) => Self::Fail,
        }
    }

    /// The label in the report.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::ExpectedFailure => "expected failure",
            Self::Fail => "**FAIL**",
            Self::StalePass => "**stale baseline entry (passes now)**",
            Self::NotScored => "not scored",
        }
    }

    /// Whether it fails the run.
    pub(crate) fn fails(self) -> bool {
        matches!(self, Self::Fail | Self::StalePass)
    }
}

/// Baseline entries that match no outcome of the runs that happened (`runs`): stale too.
pub(crate) fn unmatched<'a>(
    baseline: &'a Baseline,
    outcomes: &[Outcome],
    runs: &[String],
) -> Vec<&'a Expected> {
    baseline
        .expected_failure
        .iter()
        .filter(|entry| runs.contains(&entry.run))
        .filter(|entry| {
            !outcomes
                .iter()
                .any(|o| o.run == entry.run && o.scenario == entry.scenario)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Baseline, Outcome, Verdict};

    fn baseline() -> Baseline {
        toml::from_str(
            "[[expected_failure]]\nrun = \"r\"\nscenario = \"a\"\nreason = \"because\"\n",
        )
        .expect("valid baseline")
    }

    #[test]
    fn a_listed_failure_is_expected_and_a_listed_pass_is_stale() {
        let baseline = baseline();
        let failed = Outcome::new("r", "a", false, "");
        let passed = Outcome::new("r", "a", true, "");
        let other = Outcome::new("r", "b", false, "");
        assert_eq!(Verdict::of(&failed, &baseline), Verdict::ExpectedFailure);
        assert_eq!(Verdict::of(&passed, &baseline), Verdict::StalePass);
        assert_eq!(Verdict::of(&other, &baseline), Verdict::Fail);
        assert!(Verdict::StalePass.fails() && Verdict::Fail.fails());
        assert!(!Verdict::ExpectedFailure.fails());
    }

    #[test]
    fn an_entry_naming_nothing_that_ran_is_reported() {
        let baseline = baseline();
        let runs = vec!["r".to_owned()];
        assert_eq!(super::unmatched(&baseline, &[], &runs).len(), 1);
        let ran = [Outcome::new("r", "a", false, "")];
        assert!(super::unmatched(&baseline, &ran, &runs).is_empty());
    }
}
