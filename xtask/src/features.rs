//! `cargo xtask features`: every layer crate stands alone. Each is checked (`cargo check
//! --all-targets`, sharing the workspace's target dir) on its own with no default features and
//! with each of its features alone, so an item used without its feature gate or a dependency
//! missing from a feature fails here rather than for an integrator; then every publishable crate
//! is packaged (`cargo package --no-verify`), so the manifests carry what crates.io needs.
//!
//! cargo-hack's `--each-feature` does the same; this loop needs nothing installed.

use std::path::Path;

use crate::run;

/// The layer crates, each meant to be used alone, and the reference gateway.
const LAYER_CRATES: &[&str] = &[
    "mcp-core",
    "mcp-vhost",
    "mcp-claims",
    "mcp-config-store",
    "mcp-router",
    "mcp-breaker",
    "mcp-fallback",
    "mcp-plugins",
    "mcp-gateway",
];

pub(crate) fn features() -> Result<(), String> {
    let root = run::workspace_root();
    for krate in LAYER_CRATES {
        let features = crate_features(&root.join("crates").join(krate).join("Cargo.toml"))?;
        check(krate, None)?;
        for feature in &features {
            check(krate, Some(feature))?;
        }
    }
    let mut args = vec!["package", "--no-verify", "--allow-dirty"];
    for krate in LAYER_CRATES {
        args.extend(["-p", krate]);
    }
    run::cargo(&args)
}

fn check(krate: &str, feature: Option<&str>) -> Result<(), String> {
    let mut args = vec![
        "check",
        "-p",
        krate,
        "--all-targets",
        "--no-default-features",
    ];
    if let Some(feature) = feature {
        args.extend(["--features", feature]);
    }
    run::cargo(&args)
}

/// The features a crate declares (`default` aside), from its manifest.
fn crate_features(manifest: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let doc: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    Ok(doc
        .get("features")
        .and_then(toml::Value::as_table)
        .map(|table| {
            table
                .keys()
                .filter(|name| *name != "default")
                .cloned()
                .collect()
        })
        .unwrap_or_default())
}
