//! Installing the conformance peers into git-ignored folders, reused when present.
//!
//! - `target/conformance/node22`: Node 22 from the npm registry (`npm install node@<pinned>`;
//!   the suite needs Node >= 22, machines often have 20).
//! - `target/conformance/node`: `npm ci` of `tests/conformance/node/package{,-lock}.json`: the
//!   suite at 0.1.16 and at the 0.2.0 alpha (npm aliases `conformance-legacy` and
//!   `conformance-next`), the TypeScript SDK 1.x and 2.x, `server-everything`.
//! - `.venv/mcp1`, `.venv/mcp2`: the interop venvs (`xtask/src/interop.rs`), shared.
//!
//! Each folder holds a marker with what it was installed from, as the interop installer does.

use std::path::{Path, PathBuf};

use crate::{interop, run};

/// The pinned Node 22 release installed from the npm registry.
const NODE_PACKAGE: &str = "node@22.23.3";
/// The marker inside the Node folder (its content: [`NODE_PACKAGE`]).
const NODE_MARKER: &str = ".conformance-installed";
/// The committed npm manifests of the conformance peers.
const NODE_MANIFESTS: &str = "tests/conformance/node";

/// Where the installed peers are.
pub(crate) struct Peers {
    /// The Node 22 binary.
    pub(crate) node: PathBuf,
    /// The installed npm project (holds `node_modules`); scripts that import the SDKs run here.
    pub(crate) project: PathBuf,
    /// `.venv/mcp1/bin/python` (the Python MCP SDK 1.x).
    pub(crate) python1: PathBuf,
    /// `.venv/mcp2/bin/python` (the Python MCP SDK 2.x).
    pub(crate) python2: PathBuf,
}

impl Peers {
    /// The entry point of an installed npm package (`node_modules/<package>/<entry>`).
    pub(crate) fn package(&self, package: &str, entry: &str) -> PathBuf {
        self.project.join("node_modules").join(package).join(entry)
    }
}

/// Installs whatever is missing or stale and says where everything is.
pub(crate) fn ensure(root: &Path) -> Result<Peers, String> {
    let mut problems = Vec::new();
    for (venv, requirements) in interop::PYTHON_ENVS {
        if let Err(problem) = interop::ensure_venv(&root.join(venv), &root.join(requirements)) {
            problems.push(format!("{venv}: {problem}"));
        }
    }
    let base = root.join("target/conformance");
    let node_dir = base.join("node22");
    if let Err(problem) = ensure_node(&node_dir) {
        problems.push(format!("{}: {problem}", node_dir.display()));
    }
    let node = node_dir.join("node_modules/.bin/node");
    let project = base.join("node");
    // The machine's npm (and Node) install the packages; none has an install script that
    // needs Node 22, only running the suite does.
    if let Err(problem) = interop::ensure_node_modules(&root.join(NODE_MANIFESTS), &project) {
        problems.push(format!("{}: {problem}", project.display()));
    }
    if !problems.is_empty() {
        return Err(format!(
            "the conformance peers could not be installed (needs python3 with venv + pip, npm, \
             and access to PyPI / the npm registry):\n  - {}",
            problems.join("\n  - ")
        ));
    }
    Ok(Peers {
        node,
        project,
        python1: root.join(".venv/mcp1/bin/python"),
        python2: root.join(".venv/mcp2/bin/python"),
    })
}

fn ensure_node(dir: &Path) -> Result<(), String> {
    let marker = dir.join(NODE_MARKER);
    if dir.join("node_modules/.bin/node").is_file()
        && std::fs::read_to_string(&marker).ok().as_deref() == Some(NODE_PACKAGE)
    {
        return Ok(());
    }
    if !run::on_path("npm") {
        return Err("npm is not on PATH".to_owned());
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("cannot remove the old install: {e}"))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the folder: {e}"))?;
    run::program_in(
        dir,
        "npm",
        &[
            "install",
            "--prefix",
            ".",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            NODE_PACKAGE,
        ],
    )?;
    interop::write(&marker, NODE_PACKAGE)
}
