//! `cargo xtask conformance`: the gateway binary against the official MCP conformance suite.
//!
//! 1. Installs the peers into git-ignored folders, reused when present ([`install`]).
//! 2. Builds `mcp-gateway`, starts it as a process with a generated configuration, starts the
//!    conformance backend (`tests/conformance/backend.py`, Python SDK 2.x, both eras), and tears
//!    every process down by pid when done, also on failure ([`process::Spawned`]).
//! 3. Runs the suite (0.1.16; 0.2 alpha with `--requirements 2025-11-25` and `2026-07-28`)
//!    through a bearer-injecting hop ([`proxy`]) and the gateway, to single-backend virtual
//!    hosts with `naming = "auto"` (the backend in each era, see [`official`]); and the same
//!    suites against the backend alone, so a failure can be blamed on the gateway or the backend.
//! 4. Runs the interop matrix ([`matrix`]): six real clients x four real backends through one
//!    prefixing virtual host; a failing cell is re-run against its backend alone.
//! 5. Checks the failure contract (book: docs/src/failure-modes.md) against the binary ([`contract`]).
//! 6. Judges every scenario against `tests/conformance/baseline.toml` ([`outcome`]): a new
//!    failure or a stale entry fails the run; so does a scenario that passes against a backend
//!    alone and fails through the gateway (each such comparison is listed in the report).
//! 7. Writes `target/conformance/REPORT.md` ([`report`]) and prints `N passed, M failed`.
//!
//! `--only PARTS` and `--clients NAMES` run a part of it ([`filter`]).

mod contract;
mod filter;
mod gateway;
mod http;
mod install;
mod matrix;
mod official;
mod outcome;
mod process;
mod proxy;
mod report;
mod suite;

use crate::{prerequisites, run};
use filter::Filter;
use outcome::{Baseline, Outcome};

/// What the runs produced so far.
#[derive(Default)]
struct Collected {
    /// (run id, heading) in report order.
    sections: Vec<(String, String)>,
    outcomes: Vec<Outcome>,
    /// Runs that could not happen at all (a process did not start, ...): each fails the run.
    problems: Vec<String>,
    /// (run through the gateway, run without it), compared scenario by scenario.
    comparisons: Vec<(String, String)>,
}

impl Collected {
    fn section(&mut self, run: &str, heading: String) {
        self.sections.push((run.to_owned(), heading));
    }

    fn record(&mut self, result: Result<Vec<Outcome>, String>) {
        match result {
            Ok(outcomes) => self.outcomes.extend(outcomes),
            Err(problem) => self.problems.push(problem),
        }
    }
}

/// Runs everything and writes the report. Fails on a new failure, a stale baseline entry or a
/// run that could not happen. A peer that cannot be installed is a failure under `CI=true` and
/// a loud skip elsewhere. `args` may pick a part of the run ([`filter`]).
pub(crate) fn conformance(args: &[String]) -> Result<(), String> {
    let filter = Filter::parse(args)?;
    let root = run::workspace_root();
    let out = root.join("target/conformance");
    let peers = match install::ensure(&root) {
        Ok(peers) => peers,
        Err(message) if prerequisites::in_ci() => return Err(message),
        Err(message) => {
            println!("xtask: WARNING: {message}\nxtask: WARNING: skipping the conformance run");
            return Ok(());
        }
    };
    let baseline_path = root.join("tests/conformance/baseline.toml");
    let baseline = Baseline::load(&baseline_path)?;
    let binary = gateway::build(&root, "mcp-gateway", "mcp-gateway")?;

    let mut collected = Collected::default();
    if filter.runs("official") {
        official::run(&root, &peers, &binary, &out, &mut collected);
        collected.comparisons = official::comparisons();
    }
    if filter.runs("matrix") {
        collected.section(
            matrix::RUN,
            "Interop matrix: clients x backends through one virtual host with prefixing".to_owned(),
        );
    }
    if filter.runs("contract") {
        collected.section(
            contract::RUN,
            "Failure contract (book: docs/src/failure-modes.md) against the gateway binary"
                .to_owned(),
        );
    }
    if filter.runs("matrix") || filter.runs("contract") {
        peer_parts(&root, &peers, &binary, &out, &filter, &mut collected);
    }

    // A filtered run cannot tell an entry for something it left out from a stale one.
    let runs: Vec<String> = if filter.is_partial() {
        println!("xtask: a filtered run: baseline entries naming nothing that ran are not checked");
        Vec::new()
    } else {
        collected
            .sections
            .iter()
            .map(|(run, _)| run.clone())
            .collect()
    };
    let stale = outcome::unmatched(&baseline, &collected.outcomes, &runs);
    let (text, totals) = report::render(
        &collected.sections,
        &collected.outcomes,
        &baseline,
        &stale,
        &collected.problems,
        &collected.comparisons,
    );
    let report_path = out.join("REPORT.md");
    std::fs::write(&report_path, text)
        .map_err(|e| format!("cannot write {}: {e}", report_path.display()))?;
    println!(
        "xtask: conformance report: {} ({} expected failures, {} not scored)",
        report_path.display(),
        totals.expected,
        totals.not_scored
    );
    println!("{} passed, {} failed", totals.passed, totals.failed);
    if totals.failed == 0 {
        Ok(())
    } else {
        Err(format!(
            "conformance: {} failed (see {})",
            totals.failed,
            report_path.display()
        ))
    }
}

/// The parts that need `mcp-test-peer` (rmcp as a process): the interop matrix and the
/// failure contract (which also needs `redis-server`).
fn peer_parts(
    root: &std::path::Path,
    peers: &install::Peers,
    binary: &std::path::Path,
    out: &std::path::Path,
    filter: &Filter,
    collected: &mut Collected,
) {
    let peer = match gateway::build(root, "mcp-test-backends", "mcp-test-peer") {
        Ok(peer) => peer,
        Err(problem) => return collected.problems.push(problem),
    };
    if filter.runs("matrix") {
        let work = out.join("matrix");
        collected.record(matrix::run(root, peers, binary, &peer, filter, &work));
    }
    if !filter.runs("contract") {
        return;
    }
    match contract::redis_server() {
        Some(redis) => {
            let work = out.join("contract");
            collected.record(contract::run(root, peers, binary, &peer, &redis, &work));
        }
        None if prerequisites::in_ci() => collected
            .problems
            .push("redis-server not found: the failure-contract rows cannot run".to_owned()),
        None => println!(
            "xtask: WARNING: redis-server not found (install it or set REDIS_SERVER_BIN): \
             skipping the failure-contract rows"
        ),
    }
}
