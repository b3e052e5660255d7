//! Installing what the tests need.

use crate::run;

pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Makes sure a `redis-server` binary exists for the Redis-backed tests (they start private
/// instances on free ports). With `REDIS_URL` set the tests use that server instead.
///
/// When it is missing and we are root on a Debian-like machine, install Debian's `redis-server`.
/// Otherwise: an error under `CI=true`, a loud warning elsewhere (the tests then skip loudly).
pub(crate) fn ensure_redis_server() -> Result<(), String> {
    if std::env::var_os("REDIS_URL").is_some() || redis_server_available() {
        return Ok(());
    }
    if is_root() && run::on_path("apt-get") {
        println!("xtask: redis-server not found; installing Debian's redis-server");
        run::program("apt-get", &["update", "-q"])?;
        run::program("apt-get", &["install", "-y", "-q", "redis-server"])?;
        if redis_server_available() {
            return Ok(());
        }
    }
    let message = "redis-server is not installed and could not be installed: \
                   install it (apt-get install redis-server) or set REDIS_URL";
    if in_ci() {
        Err(message.to_owned())
    } else {
        println!("xtask: WARNING: {message}; the Redis-backed tests will skip");
        Ok(())
    }
}

/// Makes sure `haproxy` exists for the failover test (two gateway nodes behind HAProxy): installed
/// with apt-get like `redis-server` when missing and we are root; an error under `CI=true`, a loud
/// warning elsewhere (the test then skips loudly).
pub(crate) fn ensure_haproxy() -> Result<(), String> {
    ensure_debian_program("haproxy", "the failover test will skip")
}

/// Makes sure `promtool` exists for the deployment test (`crates/mcp-gateway/tests/deploy.rs`
/// checks `deploy/prometheus/alerts.yaml` with it). Debian ships it in the `prometheus` package.
pub(crate) fn ensure_promtool() -> Result<(), String> {
    ensure_debian_package(
        "promtool",
        "prometheus",
        "the alert rules will not be checked (the deploy test will skip that part)",
    )
}

/// Makes sure `systemd-analyze` exists for the systemd test (`crates/mcp-gateway/tests/systemd.rs`
/// runs `systemd-analyze verify` on `deploy/systemd/mcp-gateway.service`). Debian ships it in the
/// `systemd` package, which installs and works without systemd running as init (in a container).
pub(crate) fn ensure_systemd_analyze() -> Result<(), String> {
    ensure_debian_package(
        "systemd-analyze",
        "systemd",
        "the systemd unit will not be verified (the systemd test will skip that part)",
    )
}

/// Makes sure `program` (also the name of its Debian package) is on `PATH`: installed with
/// apt-get when missing and we are root; an error under `CI=true`, elsewhere a loud warning
/// ending in `consequence` (what goes without it).
pub(crate) fn ensure_debian_program(program: &str, consequence: &str) -> Result<(), String> {
    ensure_debian_package(program, program, consequence)
}

/// [`ensure_debian_program`] for a `program` that Debian ships in a package of another name.
fn ensure_debian_package(program: &str, package: &str, consequence: &str) -> Result<(), String> {
    if run::on_path(program) {
        return Ok(());
    }
    if is_root() && run::on_path("apt-get") {
        println!("xtask: {program} not found; installing Debian's {package}");
        run::program("apt-get", &["update", "-q"])?;
        run::program("apt-get", &["install", "-y", "-q", package])?;
        if run::on_path(program) {
            return Ok(());
        }
    }
    let message = format!(
        "{program} is not installed and could not be installed: install it (apt-get install {package})"
    );
    if in_ci() {
        Err(message)
    } else {
        println!("xtask: WARNING: {message}; {consequence}");
        Ok(())
    }
}

fn redis_server_available() -> bool {
    match std::env::var("REDIS_SERVER_BIN") {
        Ok(bin) => std::path::Path::new(&bin).is_file(),
        Err(_) => run::on_path("redis-server"),
    }
}

pub(crate) fn is_root() -> bool {
    // `id -u` avoids a libc dependency for one call.
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}
