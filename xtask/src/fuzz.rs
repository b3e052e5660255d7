//! `cargo xtask fuzz [--seconds N] [TARGET...]`: runs the cargo-fuzz targets of `fuzz/` (book: docs/src/security.md), each for N seconds (default 30), and fails if any of them finds a crash.
//!
//! libFuzzer needs unstable compiler flags; the stable toolchain accepts them with
//! `RUSTC_BOOTSTRAP=1`, set for the cargo-fuzz commands only. Fuzz builds (sanitizer flags) use
//! their own target directory so they never evict the workspace's shared build artifacts.
//! cargo-fuzz is installed from crates.io when missing. Each target's working corpus is
//! `fuzz/corpus/<target>/` (git-ignored, kept between runs); the committed seeds in
//! `fuzz/seeds/<target>/` are read as a second corpus and never written.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::run;

/// Fuzz builds go here, not into the workspace's `CARGO_TARGET_DIR` (`MCP_FUZZ_TARGET_DIR`
/// overrides it).
const DEFAULT_TARGET_DIR: &str = "/var/tmp/mcp-gateway-fuzz-target";
const DEFAULT_SECONDS: u64 = 30;

/// What one target's run reported.
struct Outcome {
    target: String,
    runs: Option<u64>,
    execs_per_sec: Option<u64>,
    new_corpus_units: usize,
    failure: Option<String>,
}

pub(crate) fn fuzz(args: &[String]) -> Result<(), String> {
    let (seconds, requested) = parse_args(args)?;
    let root = run::workspace_root();
    let fuzz_dir = root.join("fuzz");
    let all = targets(&fuzz_dir)?;
    for t in &requested {
        if !all.contains(t) {
            return Err(format!(
                "unknown fuzz target `{t}`; targets: {}",
                all.join(", ")
            ));
        }
    }
    let selected = if requested.is_empty() { all } else { requested };
    ensure_cargo_fuzz()?;
    let target_dir =
        std::env::var("MCP_FUZZ_TARGET_DIR").unwrap_or_else(|_| DEFAULT_TARGET_DIR.to_owned());

    // Build every target first (one cargo invocation), so a compile error shows once and the
    // timed runs do not include compilation.
    status(&mut cargo_fuzz("build", &target_dir), "cargo fuzz build")?;

    let mut outcomes = Vec::new();
    for target in &selected {
        outcomes.push(run_target(&root, &target_dir, target, seconds)?);
    }

    println!("\nxtask: fuzz summary ({seconds} s per target)");
    println!("| target | runs | exec/s | new corpus units | result |");
    println!("|---|---:|---:|---:|---|");
    let show = |n: Option<u64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    for o in &outcomes {
        println!(
            "| {} | {} | {} | {} | {} |",
            o.target,
            show(o.runs),
            show(o.execs_per_sec),
            o.new_corpus_units,
            if o.failure.is_some() { "FAILED" } else { "ok" }
        );
    }
    let failures: Vec<&String> = outcomes.iter().filter_map(|o| o.failure.as_ref()).collect();
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            println!("\n{f}");
        }
        Err(format!("{} fuzz target(s) failed", failures.len()))
    }
}

/// Type-checks every fuzz target (`cargo xtask test` runs it): the fuzz workspace is not a
/// member of the main one, so nothing else notices an API change that breaks a target. A check
/// needs neither cargo-fuzz nor libFuzzer's unstable flags (libfuzzer-sys' build script compiles
/// libFuzzer with the machine's C++ compiler). `--locked`: the fuzz workspace's own Cargo.lock
/// must be current, as the main one must.
pub(crate) fn check_builds() -> Result<(), String> {
    let target_dir =
        std::env::var("MCP_FUZZ_TARGET_DIR").unwrap_or_else(|_| DEFAULT_TARGET_DIR.to_owned());
    let check_dir = format!("{target_dir}/check");
    run::cargo(&[
        "check",
        "--manifest-path",
        "fuzz/Cargo.toml",
        "--bins",
        "--locked",
        "--target-dir",
        &check_dir,
    ])
}

fn parse_args(args: &[String]) -> Result<(u64, Vec<String>), String> {
    let mut seconds = DEFAULT_SECONDS;
    let mut targets = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = match arg.as_str() {
            "--seconds" => Some(iter.next().ok_or("--seconds needs a value")?.as_str()),
            other => other.strip_prefix("--seconds="),
        };
        if let Some(value) = value {
            seconds = value
                .parse()
                .ok()
                .filter(|s| *s > 0)
                .ok_or_else(|| format!("--seconds: `{value}` is not a positive number"))?;
        } else if arg.starts_with('-') {
            return Err(format!(
                "unknown option `{arg}`; usage: cargo xtask fuzz [--seconds N] [TARGET...]"
            ));
        } else {
            targets.push(arg.clone());
        }
    }
    Ok((seconds, targets))
}

/// The targets: one `fuzz/fuzz_targets/<name>.rs` each, sorted.
fn targets(fuzz_dir: &Path) -> Result<Vec<String>, String> {
    let dir = fuzz_dir.join("fuzz_targets");
    let entries =
        std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    names.sort();
    Ok(names)
}

fn ensure_cargo_fuzz() -> Result<(), String> {
    let installed = Command::new(cargo_bin())
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if installed {
        return Ok(());
    }
    println!("xtask: cargo-fuzz not found; installing it from crates.io");
    run::cargo(&["install", "cargo-fuzz", "--locked"])
}

fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// `cargo fuzz <subcommand> --fuzz-dir fuzz --target-dir <dir>` in the workspace root.
fn cargo_fuzz(subcommand: &str, target_dir: &str) -> Command {
    let mut cmd = Command::new(cargo_bin());
    cmd.current_dir(run::workspace_root())
        .env("RUSTC_BOOTSTRAP", "1")
        .args([
            "fuzz",
            subcommand,
            "--fuzz-dir",
            "fuzz",
            "--target-dir",
            target_dir,
        ]);
    cmd
}

fn status(cmd: &mut Command, what: &str) -> Result<(), String> {
    println!("xtask: {what}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{what}` failed ({status})"))
    }
}

fn run_target(
    root: &Path,
    target_dir: &str,
    target: &str,
    seconds: u64,
) -> Result<Outcome, String> {
    let corpus = root.join("fuzz/corpus").join(target);
    let seeds = root.join("fuzz/seeds").join(target);
    std::fs::create_dir_all(&corpus)
        .map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
    let before = count_files(&corpus);
    let mut cmd = cargo_fuzz("run", target_dir);
    cmd.arg(target)
        .arg(&corpus)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        // A single input this slow is a hang, not a slow machine.
        .arg("-timeout=60")
        .arg("-print_final_stats=1")
        .stderr(Stdio::piped());
    println!("\nxtask: fuzzing `{target}` for {seconds} s");
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    let mut runs = None;
    let mut execs_per_sec = None;
    let mut artifact: Option<PathBuf> = None;
    let mut in_dictionary = false;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(n) = stat(&line, "stat::number_of_executed_units:") {
                runs = Some(n);
            } else if let Some(n) = stat(&line, "stat::average_exec_per_sec:") {
                execs_per_sec = Some(n);
            }
            if let Some((_, path)) = line.split_once("Test unit written to ") {
                artifact = Some(root.join(path.trim()));
            }
            // libFuzzer's progress lines (`#1234 NEW ...`), start-up notes and the recommended
            // dictionary it prints on exit would drown the crash report and the stats.
            if line.starts_with("###### Recommended dictionary") {
                in_dictionary = true;
            } else if line.starts_with("###### End of recommended dictionary") {
                in_dictionary = false;
            } else if !in_dictionary && !line.starts_with('#') && !line.starts_with("INFO:") {
                eprintln!("{line}");
            }
        }
    }
    let exit = child
        .wait()
        .map_err(|e| format!("cargo fuzz did not finish: {e}"))?;
    let failure = (!exit.success()).then(|| {
        let reproduce = match &artifact {
            Some(path) => format!(
                "artifact: {}\nreproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz \
                 --target-dir {target_dir} {target} {}",
                path.display(),
                path.display()
            ),
            None => {
                format!("no artifact reported; see fuzz/artifacts/{target}/ and the output above")
            }
        };
        format!("fuzz target `{target}` failed ({exit})\n{reproduce}")
    });
    Ok(Outcome {
        target: target.to_owned(),
        runs,
        execs_per_sec,
        new_corpus_units: count_files(&corpus).saturating_sub(before),
        failure,
    })
}

/// The number after `key` in a libFuzzer final-stats line.
fn stat(line: &str, key: &str) -> Option<u64> {
    line.strip_prefix(key)?.trim().parse().ok()
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| entries.filter_map(Result::ok).count())
}
