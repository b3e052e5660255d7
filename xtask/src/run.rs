//! Running cargo and other programs, failing loudly.

use std::process::{Command, Stdio};

/// The cargo that runs this xtask (`$CARGO`), so toolchain overrides carry through.
fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs `cargo <args>` in the workspace root, inheriting the terminal.
pub(crate) fn cargo(args: &[&str]) -> Result<(), String> {
    cargo_with_env(args, &[])
}

/// [`cargo`] with extra environment variables.
pub(crate) fn cargo_with_env(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    println!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo_bin())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

/// Whether `cargo nextest` is installed.
pub(crate) fn has_nextest() -> bool {
    Command::new(cargo_bin())
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether a program is on `PATH`.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Runs a program with arguments, inheriting the terminal.
pub(crate) fn program(name: &str, args: &[&str]) -> Result<(), String> {
    program_in(&workspace_root(), name, args)
}

/// Runs a program with arguments in `dir`, inheriting the terminal.
pub(crate) fn program_in(dir: &std::path::Path, name: &str, args: &[&str]) -> Result<(), String> {
    println!("xtask: {name} {}", args.join(" "));
    let status = Command::new(name)
        .args(args)
        .current_dir(dir)
        .status()
        .map_err(|e| format!("cannot run {name}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{name} {}` failed ({status})", args.join(" ")))
    }
}

/// The workspace root: the parent of this crate's manifest directory.
///
/// Read at run time (`cargo run` sets `CARGO_MANIFEST_DIR` for the binary it runs), not baked in
/// at compile time: several checkouts may share one `CARGO_TARGET_DIR` (CI clones next to a
/// working tree), and a fresh binary built from another checkout would otherwise drive that
/// other checkout's tests.
pub(crate) fn workspace_root() -> std::path::PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or(manifest)
}

/// `bytes` random bytes from the OS, hex-encoded (test secrets).
pub(crate) fn random_hex(bytes: usize) -> Result<String, String> {
    use std::io::Read as _;
    let mut buffer = vec![0_u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut buffer))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}
