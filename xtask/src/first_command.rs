//! The README's first command (`cargo run --release --example gateway`) must not compile what only
//! tests use: an example builds every dev-dependency of its package, so the root package (which
//! owns `examples/`) keeps none of the test crates. Checked with `cargo tree` by `cargo xtask test`.

use std::process::Command;

/// Packages only tests use; none may be in the root package's dependency tree.
const TEST_ONLY: &[&str] = &["mcp-test-support", "mcp-test-backends", "mcp-bench"];

/// Fails when the root package's normal or dev-dependency tree holds a test-only package.
pub(crate) fn check() -> Result<(), String> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args([
            "tree",
            "--package",
            "mcp-gateway-workspace",
            "--edges",
            "normal,dev",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(crate::run::workspace_root())
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let found = test_only_in(&String::from_utf8_lossy(&output.stdout));
    if found.is_empty() {
        println!("xtask: the first command builds no test-only package");
        Ok(())
    } else {
        Err(format!(
            "`cargo run --example gateway` would compile test-only packages ({}): \
             remove them from the root package's dev-dependencies",
            found.join(", ")
        ))
    }
}

/// The test-only packages named in a `cargo tree --prefix none --format {p}` listing.
fn test_only_in(tree: &str) -> Vec<&'static str> {
    TEST_ONLY
        .iter()
        .copied()
        .filter(|name| {
            tree.lines()
                .any(|line| line.split_whitespace().next() == Some(*name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_only_package_in_the_tree_is_named() {
        let tree = "mcp-gateway-workspace v0.2.0 (/w)\nmcp-gateway v0.2.0 (/w/crates/mcp-gateway)\n\
                    mcp-test-backends v0.2.0 (/w/crates/mcp-test-backends)\ntokio v1.48.0\n";
        assert_eq!(test_only_in(tree), vec!["mcp-test-backends"]);
        assert!(test_only_in("mcp-gateway v0.2.0 (/w)\nmcp-test-backendsX v1\n").is_empty());
    }
}
