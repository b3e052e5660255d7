//! Installing the real peers of the cross-language interop tests (`crates/mcp-gateway/tests/interop.rs`, and the stdio/SSE backend suites in `crates/mcp-router/tests`).
//!
//! - `.venv/mcp1` and `.venv/mcp2`: Python venvs made with the machine's `python3`, holding the
//!   Python MCP SDK 1.x and 2.x (`pip install -r tests/interop/requirements-mcp{1,2}.txt`, every
//!   package pinned). Two venvs because the two majors cannot share one.
//! - `tests/interop/node/node_modules`: `npm ci` from the committed `package.json` +
//!   `package-lock.json` (the TypeScript SDK 1.x client and `server-everything`).
//!
//! Each folder gets a marker file holding the manifest it was installed from; when the marker
//! matches the committed manifest nothing runs, so a second `cargo xtask test` costs nothing.
//! The tests read the same markers to decide whether the peers are there.

use std::path::Path;

use crate::{prerequisites, run};

/// The marker written into each installed folder (its content: the manifest installed from).
/// `mcp_test_support::peers` reads the same name.
const MARKER: &str = ".interop-installed";

/// (venv folder under the workspace root, pinned requirements file). `cargo xtask conformance`
/// uses the same venvs.
pub(crate) const PYTHON_ENVS: [(&str, &str); 2] = [
    (".venv/mcp1", "tests/interop/requirements-mcp1.txt"),
    (".venv/mcp2", "tests/interop/requirements-mcp2.txt"),
];

/// The npm project (package.json, package-lock.json) whose node_modules the tests use.
const NODE_PROJECT: &str = "tests/interop/node";

/// Installs whatever is missing or stale. Under `CI=true` a failure is an error; elsewhere it is
/// a loud warning and the interop tests skip loudly.
pub(crate) fn ensure_interop_peers() -> Result<(), String> {
    let root = run::workspace_root();
    let mut problems = Vec::new();
    for (venv, requirements) in PYTHON_ENVS {
        if let Err(problem) = ensure_venv(&root.join(venv), &root.join(requirements)) {
            problems.push(format!("{venv}: {problem}"));
        }
    }
    let project = root.join(NODE_PROJECT);
    if let Err(problem) = ensure_node_modules(&project, &project) {
        problems.push(format!("{NODE_PROJECT}/node_modules: {problem}"));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let message = format!(
        "the interop test peers could not be installed (needs python3 with venv + pip, and \
         node >= 20 with npm, and access to PyPI / the npm registry):\n  - {}",
        problems.join("\n  - ")
    );
    if prerequisites::in_ci() {
        Err(message)
    } else {
        println!("xtask: WARNING: {message}\nxtask: WARNING: the interop tests will skip");
        Ok(())
    }
}

/// Makes `venv` a venv holding exactly `requirements` (pip install -r), unless its marker says it
/// already is.
pub(crate) fn ensure_venv(venv: &Path, requirements: &Path) -> Result<(), String> {
    let wanted = read(requirements)?;
    let marker = venv.join(MARKER);
    if venv.join("bin/python").is_file()
        && std::fs::read_to_string(&marker).ok() == Some(wanted.clone())
    {
        return Ok(());
    }
    println!(
        "xtask: installing {} into {}",
        requirements.display(),
        venv.display()
    );
    if venv.exists() {
        std::fs::remove_dir_all(venv).map_err(|e| format!("cannot remove the old venv: {e}"))?;
    }
    if !run::on_path("python3") {
        return Err("python3 is not on PATH".to_owned());
    }
    run::program("python3", &["-m", "venv", path_str(venv)?])?;
    let python = venv.join("bin/python");
    run::program(
        path_str(&python)?,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "-r",
            path_str(requirements)?,
        ],
    )?;
    write(&marker, &wanted)
}

/// Installs the npm project whose `package.json` + `package-lock.json` are in `manifests` into
/// `project/node_modules` (`npm ci`; the manifests are copied there first when the folders
/// differ), unless the marker says it is installed from the same lock file.
pub(crate) fn ensure_node_modules(manifests: &Path, project: &Path) -> Result<(), String> {
    let wanted = read(&manifests.join("package-lock.json"))?;
    let marker = project.join("node_modules").join(MARKER);
    if std::fs::read_to_string(&marker).ok() == Some(wanted.clone()) {
        return Ok(());
    }
    println!(
        "xtask: installing {}/package-lock.json (npm ci) into {}",
        manifests.display(),
        project.display()
    );
    for tool in ["node", "npm"] {
        if !run::on_path(tool) {
            return Err(format!("{tool} is not on PATH"));
        }
    }
    if manifests != project {
        std::fs::create_dir_all(project)
            .map_err(|e| format!("cannot create {}: {e}", project.display()))?;
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(manifests.join(file), project.join(file))
                .map_err(|e| format!("cannot copy {file} to {}: {e}", project.display()))?;
        }
    }
    // npm ci removes node_modules first, so a half-finished earlier install does not linger.
    run::program_in(
        project,
        "npm",
        &["ci", "--no-audit", "--no-fund", "--loglevel=error"],
    )?;
    write(&marker, &wanted)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

pub(crate) fn write(path: &Path, content: &str) -> Result<(), String> {
    std::fs::write(path, content).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn path_str(path: &Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))
}
