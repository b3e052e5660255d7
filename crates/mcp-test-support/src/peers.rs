//! Real peers installed by `cargo xtask test` (the Python SDK venvs, the npm project): where they
//! are, and whether they are installed from the current manifests. A missing peer skips its test
//! loudly, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};

/// Written by `cargo xtask test` into each installed folder, holding the manifest it installed.
pub const MARKER: &str = ".interop-installed";

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether this is a CI run (`CI=true`): missing peers fail instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Reports a skipped test. It must be visible in the test output, and stderr is the only channel
/// the test runners show for a passing test.
#[allow(clippy::print_stderr)]
pub fn skipped(reason: &str) {
    eprintln!("\n*** SKIPPING INTEROP TEST: {reason} ***\n");
}

/// True when `folder` was installed from the current `manifest` (its marker holds the same text)
/// and `needed` exists. Otherwise panics under `CI=true`, else reports the skip.
pub fn installed(folder: &Path, manifest: &Path, needed: &Path) -> bool {
    let marker = std::fs::read(folder.join(MARKER)).ok();
    let wanted = std::fs::read(manifest)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest.display()));
    if marker.as_deref() == Some(wanted.as_slice()) && needed.exists() {
        return true;
    }
    let reason = format!(
        "{} is missing or not installed from the current {}: run `cargo xtask test` once \
         (it installs the interop peers)",
        folder.display(),
        manifest.display()
    );
    if in_ci() {
        panic!("{reason}; CI=true requires the interop tests to run");
    }
    skipped(&reason);
    false
}

/// The interpreter of `.venv/<venv>` (`mcp1` or `mcp2`), when installed.
pub fn python(venv: &str) -> Option<PathBuf> {
    let folder = root().join(".venv").join(venv);
    let interpreter = folder.join("bin/python");
    let manifest = root().join(format!("tests/interop/requirements-{venv}.txt"));
    installed(&folder, &manifest, &interpreter).then_some(interpreter)
}
