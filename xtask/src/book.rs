//! `cargo xtask book`: builds the book in `docs/` with mdBook (HTML, plus the link checker as a
//! second renderer, so a broken link inside the book fails the build) and runs every Rust snippet
//! of it with `mdbook test`. Also run by `cargo xtask test`.
//!
//! `cargo xtask config-reference` rewrites the generated key table of
//! `docs/src/configuration.md` from `mcp-gateway config-keys` (a test of `mcp-gateway` fails when
//! it has drifted).
//!
//! mdBook and mdbook-linkcheck are pinned and installed with `cargo install --locked` into
//! `.tools/mdbook/` (git-ignored) when missing or of another version, like the other test peers.

use std::path::Path;
use std::process::Command;

use crate::prerequisites::in_ci;
use crate::run;

/// mdBook 0.4 is the release line mdbook-linkcheck renders for.
const MDBOOK: (&str, &str) = ("mdbook", "0.4.52");
const LINKCHECK: (&str, &str) = ("mdbook-linkcheck", "0.7.7");

const START: &str = "<!-- config-keys:start -->\n";
const END: &str = "<!-- config-keys:end -->";

/// Builds, link-checks and tests the book.
pub(crate) fn book() -> Result<(), String> {
    let root = run::workspace_root();
    let tools = root.join(".tools").join("mdbook");
    for (name, version) in [MDBOOK, LINKCHECK] {
        if let Err(message) = ensure_tool(&tools, name, version) {
            if in_ci() {
                return Err(message);
            }
            println!("xtask: WARNING: {message}; the book was not built or tested");
            return Ok(());
        }
    }
    let bin = tools.join("bin");
    let path = match std::env::var_os("PATH") {
        Some(path) => {
            let mut dirs = vec![bin.clone()];
            dirs.extend(std::env::split_paths(&path));
            std::env::join_paths(dirs).map_err(|e| format!("PATH: {e}"))?
        }
        None => bin.clone().into_os_string(),
    };
    let mdbook = bin.join("mdbook");
    let docs = root.join("docs");

    // The snippets' crates, built alone; `-L` gets a directory holding exactly this build's
    // artifacts, so every crate has one candidate even after earlier builds with other features.
    let deps_target =
        crate::bench::target_dir(&root, std::env::var_os("CARGO_TARGET_DIR")).join("book-deps");
    let deps = snippet_deps(&root, &deps_target)?;

    run_mdbook(&mdbook, &path, &docs, &["build"])?;
    run_mdbook(
        &mdbook,
        &path,
        &docs,
        &["test", "--library-path", &deps.to_string_lossy()],
    )
}

/// Builds `mcp-book-deps` into `target` and links the artifacts of this build (and only those)
/// into `target/snippet-deps`, which it returns.
fn snippet_deps(root: &Path, target: &Path) -> Result<std::path::PathBuf, String> {
    let target_arg = target.to_string_lossy().into_owned();
    let args = [
        "build",
        "-p",
        "mcp-book-deps",
        "--target-dir",
        &target_arg,
        "--message-format",
        "json-render-diagnostics",
    ];
    println!("xtask: cargo {}", args.join(" "));
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(args)
        .current_dir(root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo {}` failed ({})",
            args.join(" "),
            output.status
        ));
    }
    let dir = target.join("snippet-deps");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for artifact in artifacts(&String::from_utf8_lossy(&output.stdout)) {
        let Some(name) = artifact.file_name() else {
            continue;
        };
        std::os::unix::fs::symlink(&artifact, dir.join(name))
            .map_err(|e| format!("{}: {e}", artifact.display()))?;
    }
    Ok(dir)
}

/// The library files (`.rlib`, `.rmeta`, proc-macro `.so`) of cargo's `compiler-artifact`
/// messages.
fn artifacts(messages: &str) -> Vec<std::path::PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .flat_map(|message| {
            message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|file| file.as_str().map(std::path::PathBuf::from))
                .collect::<Vec<_>>()
        })
        .filter(|file| {
            file.extension()
                .is_some_and(|ext| ext == "rlib" || ext == "rmeta" || ext == "so")
        })
        .collect()
}

/// Rewrites the generated key table of `docs/src/configuration.md`.
pub(crate) fn config_reference() -> Result<(), String> {
    let root = run::workspace_root();
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(["run", "--quiet", "-p", "mcp-gateway", "--", "config-keys"])
        .current_dir(&root)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`mcp-gateway config-keys` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let table = String::from_utf8(output.stdout).map_err(|e| format!("config-keys: {e}"))?;
    let file = root.join("docs").join("src").join("configuration.md");
    let chapter = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let updated = replace_between_markers(&chapter, &table)
        .ok_or_else(|| format!("{}: the config-keys markers are missing", file.display()))?;
    if updated == chapter {
        println!("xtask: {} is up to date", file.display());
        return Ok(());
    }
    std::fs::write(&file, updated).map_err(|e| format!("{}: {e}", file.display()))?;
    println!("xtask: rewrote the key table of {}", file.display());
    Ok(())
}

/// `text` with what stands between the markers replaced by `table`; `None` without markers.
fn replace_between_markers(text: &str, table: &str) -> Option<String> {
    let (head, rest) = text.split_once(START)?;
    let (_, tail) = rest.split_once(END)?;
    Some(format!("{head}{START}{table}{END}{tail}"))
}

fn run_mdbook(
    mdbook: &Path,
    path: &std::ffi::OsStr,
    docs: &Path,
    args: &[&str],
) -> Result<(), String> {
    println!("xtask: mdbook {}", args.join(" "));
    let status = Command::new(mdbook)
        .args(args)
        .current_dir(docs)
        .env("PATH", path)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", mdbook.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`mdbook {}` failed ({status})", args.join(" ")))
    }
}

/// Installs `name` at `version` under `tools` unless that version is there already.
fn ensure_tool(tools: &Path, name: &str, version: &str) -> Result<(), String> {
    let binary = tools.join("bin").join(name);
    let installed = Command::new(&binary)
        .arg("--version")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(version));
    if installed {
        return Ok(());
    }
    println!(
        "xtask: installing {name} {version} into {}",
        tools.display()
    );
    let root = tools.to_string_lossy().into_owned();
    let mut args = vec![
        "install",
        name,
        "--version",
        version,
        "--locked",
        "--root",
        &root,
        "--force",
    ];
    // Only the HTML renderer and its search index: no file watcher, no web server.
    if name == MDBOOK.0 {
        args.extend(["--no-default-features", "--features", "search"]);
    }
    run::cargo(&args).map_err(|e| format!("cannot install {name} {version}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_between_the_markers_is_replaced_and_the_rest_kept() {
        let text = "intro\n<!-- config-keys:start -->\nold\n<!-- config-keys:end -->\nafter\n";
        assert_eq!(
            replace_between_markers(text, "new\n").as_deref(),
            Some("intro\n<!-- config-keys:start -->\nnew\n<!-- config-keys:end -->\nafter\n")
        );
        assert_eq!(replace_between_markers("no markers", "x"), None);
    }

    #[test]
    fn only_library_artifacts_of_the_build_are_linked() {
        let messages = r#"{"reason":"compiler-artifact","filenames":["/t/deps/libtower-1.rlib","/t/deps/libtower-1.rmeta"]}
{"reason":"build-script-executed","filenames":["/t/build/x"]}
{"reason":"compiler-artifact","filenames":["/t/deps/libserde_derive-2.so","/t/build/foo/build_script_build-3"]}
not json"#;
        assert_eq!(
            artifacts(messages),
            vec![
                std::path::PathBuf::from("/t/deps/libtower-1.rlib"),
                std::path::PathBuf::from("/t/deps/libtower-1.rmeta"),
                std::path::PathBuf::from("/t/deps/libserde_derive-2.so"),
            ]
        );
    }
}
