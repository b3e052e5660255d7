//! `cargo xtask bench [--quick] [--profile] [--instructions] [--runtime MODE] [--baseline FILE]`:
//! builds the
//! release gateway and the `mcp-bench` harness, installs Debian's `haproxy` (and, with
//! `--profile`, `strace`) when missing, then runs every benchmark scenario (book:
//! docs/src/performance.md) in one invocation and writes `target/bench/REPORT.md` and
//! `target/bench/report.json` under the workspace root. `--instructions` instead counts the
//! gateway's instructions per operation under callgrind (`target/bench/INSTRUCTIONS.md` and
//! `instructions.json`): the measure of one optimisation step that a busy machine cannot spoil.
//!
//! The measuring happens in `crates/mcp-bench` (this crate stays dependency-free); CI never runs
//! it, because figures from a shared machine are not pass/fail material.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{prerequisites, run};

const USAGE: &str = "\
cargo xtask bench [--quick] [--profile] [--instructions] [--runtime MODE] [--baseline FILE]

  --quick           the smoke version (1 round, short runs, 2,000 sessions)
  --profile         also count system calls per tools/call of the gateway and HAProxy (strace)
  --instructions    instead count the gateway's instructions per operation (valgrind callgrind;
                    repeatable on a busy machine): target/bench/INSTRUCTIONS.md, instructions.json
  --runtime MODE    the gateway's runtime.mode: work-stealing (its default) or thread-per-core
  --baseline FILE   a previous report.json (instructions.json with --instructions): the
                    Markdown report gets a now/baseline table

Installs Debian's haproxy (and strace with --profile) when missing and root; without it, CI=true
fails and elsewhere REPORT.md says what was not measured.

Writes target/bench/REPORT.md and target/bench/report.json (workspace root).
";

/// What the command line asked for.
#[derive(Debug, Default, PartialEq, Eq)]
struct BenchArgs {
    quick: bool,
    profile: bool,
    instructions: bool,
    /// `--runtime`: the gateway's `runtime.mode` (`None`: the harness's default).
    runtime: Option<String>,
    baseline: Option<PathBuf>,
    help: bool,
}

fn parse(args: &[String]) -> Result<BenchArgs, String> {
    let mut parsed = BenchArgs::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => parsed.quick = true,
            "--profile" => parsed.profile = true,
            "--instructions" => parsed.instructions = true,
            "--runtime" => match args.next().map(String::as_str) {
                Some(mode @ ("work-stealing" | "thread-per-core")) => {
                    parsed.runtime = Some(mode.to_owned());
                }
                _ => {
                    return Err(format!(
                        "--runtime needs work-stealing or thread-per-core\n\n{USAGE}"
                    ));
                }
            },
            "--baseline" => {
                let file = args
                    .next()
                    .ok_or_else(|| format!("--baseline needs a file\n\n{USAGE}"))?;
                parsed.baseline = Some(PathBuf::from(file));
            }
            "-h" | "--help" => parsed.help = true,
            other => return Err(format!("unknown bench option `{other}`\n\n{USAGE}")),
        }
    }
    if parsed.instructions && (parsed.quick || parsed.profile) {
        return Err(format!(
            "--instructions counts instructions only: it takes neither --quick nor --profile\n\n{USAGE}"
        ));
    }
    Ok(parsed)
}

/// Runs the benchmark.
pub(crate) fn bench(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    if args.help {
        print!("{USAGE}");
        return Ok(());
    }
    // Resolved against the caller's directory before programs run in the workspace root.
    let baseline = args
        .baseline
        .map(|file| std::path::absolute(&file).map_err(|e| format!("{}: {e}", file.display())))
        .transpose()?;
    if let Some(file) = &baseline
        && !file.is_file()
    {
        return Err(format!("baseline {} does not exist", file.display()));
    }
    if args.instructions {
        prerequisites::ensure_debian_program("valgrind", "no instructions can be counted")?;
        prerequisites::ensure_debian_program("strace", "the report will count no syscalls")?;
    } else {
        // The floor every scenario's gateway figure is read against; the harness notes its
        // absence in the report.
        prerequisites::ensure_debian_program("haproxy", "the report will have no HAProxy floor")?;
    }
    if args.profile {
        prerequisites::ensure_debian_program("strace", "the report will count no syscalls")?;
    }
    run::cargo(&["build", "--release", "-p", "mcp-gateway", "-p", "mcp-bench"])?;
    let root = run::workspace_root();
    let release = target_dir(&root, std::env::var_os("CARGO_TARGET_DIR")).join("release");
    let harness = release.join("mcp-bench");
    let gateway = release.join("mcp-gateway");
    for binary in [&harness, &gateway] {
        if !binary.is_file() {
            return Err(format!(
                "{} not found after the build (is the target directory configured elsewhere than CARGO_TARGET_DIR?)",
                binary.display()
            ));
        }
    }
    // The report belongs to the checkout, wherever the shared target directory is.
    let out = root.join("target").join("bench");
    let mut command_args: Vec<String> = vec![
        if args.instructions {
            "instructions"
        } else {
            "run"
        }
        .into(),
        "--gateway-bin".into(),
        path_arg(&gateway)?,
        "--out".into(),
        path_arg(&out)?,
    ];
    if args.quick {
        command_args.push("--quick".into());
    }
    if args.profile {
        command_args.push("--profile".into());
    }
    if let Some(mode) = &args.runtime {
        command_args.push("--runtime".into());
        command_args.push(mode.clone());
    }
    if let Some(file) = &baseline {
        command_args.push("--baseline".into());
        command_args.push(path_arg(file)?);
    }
    if let Some(rev) = git_revision(&root) {
        command_args.push("--git-rev".into());
        command_args.push(rev);
    }
    let borrowed: Vec<&str> = command_args.iter().map(String::as_str).collect();
    run::program(&path_arg(&harness)?, &borrowed)
}

/// `$CARGO_TARGET_DIR` (relative to the workspace root when relative), else `<root>/target`.
/// The target directory cargo uses: `CARGO_TARGET_DIR` (relative to the workspace root) or
/// `target/`.
pub(crate) fn target_dir(root: &Path, env: Option<std::ffi::OsString>) -> PathBuf {
    match env {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

fn path_arg(path: &Path) -> Result<String, String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

/// `git rev-parse --short HEAD`, with `-dirty` when the tree has changes (read-only commands).
fn git_revision(root: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let rev = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{rev}-dirty") } else { rev })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_parse_and_unknown_ones_are_refused() {
        assert_eq!(parse(&[]), Ok(BenchArgs::default()));
        let parsed = parse(&args(&["--quick", "--baseline", "old.json"])).expect("valid");
        assert!(parsed.quick);
        assert!(!parsed.profile);
        assert!(parse(&args(&["--profile"])).expect("valid").profile);
        assert_eq!(parsed.baseline, Some(PathBuf::from("old.json")));
        assert!(parse(&args(&["--baseline"])).is_err());
        assert!(
            parse(&args(&["--instructions"]))
                .expect("valid")
                .instructions
        );
        assert!(
            parse(&args(&["--instructions", "--quick"]))
                .expect_err("exclusive")
                .contains("takes neither --quick nor --profile")
        );
        assert_eq!(
            parse(&args(&["--runtime", "thread-per-core"]))
                .expect("valid")
                .runtime
                .as_deref(),
            Some("thread-per-core")
        );
        assert!(
            parse(&args(&["--runtime", "per-core"]))
                .expect_err("unknown mode")
                .contains("--runtime needs work-stealing or thread-per-core")
        );
        assert!(
            parse(&args(&["--fast"]))
                .expect_err("unknown")
                .contains("unknown bench option `--fast`")
        );
    }

    #[test]
    fn the_target_dir_follows_cargo_target_dir() {
        let root = Path::new("/repo");
        assert_eq!(target_dir(root, None), PathBuf::from("/repo/target"));
        assert_eq!(
            target_dir(root, Some("".into())),
            PathBuf::from("/repo/target")
        );
        assert_eq!(target_dir(root, Some("t".into())), PathBuf::from("/repo/t"));
        assert_eq!(
            target_dir(root, Some("/var/tmp/t".into())),
            PathBuf::from("/var/tmp/t")
        );
    }
}
