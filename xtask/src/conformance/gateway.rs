//! The gateway under test: the real `mcp-gateway` binary, started as a process with a generated
//! configuration (a file store whose users come from `tests/conformance/users.json`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::process::{self, Spawned};
use crate::run;

/// The environment variable holding the HS256 secret of this run.
const SECRET_ENV: &str = "MCP_GATEWAY_JWT_SECRET";
/// The accepted token issuer.
pub(crate) const ISSUER: &str = "https://issuer.example";
/// The accepted token audience.
pub(crate) const AUDIENCE: &str = "mcp-gateway";
/// The subject whose user configuration the generated users file holds.
pub(crate) const SUBJECT: &str = "conformance";

/// Builds binary `bin` of `package` (debug profile: the test run has it warm) and returns its
/// path.
pub(crate) fn build(root: &Path, package: &str, bin: &str) -> Result<PathBuf, String> {
    run::cargo(&["build", "--quiet", "-p", package, "--bin", bin])?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        })
        .unwrap_or_else(|| root.join("target"));
    let binary = target.join("debug").join(bin);
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!("{} was not built", binary.display()))
    }
}

/// A running gateway process (killed on drop) and what clients need to reach it.
pub(crate) struct RunningGateway {
    /// The MCP listener.
    pub(crate) addr: SocketAddr,
    binary: PathBuf,
    config: PathBuf,
    /// The sections after the generated ones (see [`Self::start_with`]).
    sections: String,
    secret: String,
    /// The extra environment of the process; `token` runs with it too, so it sees the same
    /// configuration (e.g. the required scopes it defaults to).
    env: Vec<(String, String)>,
    /// The process log (each start rewrites it).
    log: PathBuf,
    process: Option<Spawned>,
}

impl RunningGateway {
    /// Writes `gateway.toml` + `users.json` (`users` is the user configuration of [`SUBJECT`])
    /// into `dir` and starts the binary on free ports.
    pub(crate) fn start(binary: &Path, dir: &Path, users: &str) -> Result<Self, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        write(
            &dir.join("users.json"),
            &format!("{{\"users\": {{\"{SUBJECT}\": {users}}}}}\n"),
        )?;
        Self::start_with(
            binary,
            dir,
            "[config_store]\nkind = \"file\"\npath = \"users.json\"\n",
            &[],
        )
    }

    /// Writes `gateway.toml` with `sections` (TOML: at least `[config_store]`; more sections may
    /// follow) into `dir` and starts the binary on free ports with the extra environment `env`
    /// (`MCP_GATEWAY_*` keys of sections the file already has, e.g. `[auth.jwt]`).
    pub(crate) fn start_with(
        binary: &Path,
        dir: &Path,
        sections: &str,
        env: &[(&str, &str)],
    ) -> Result<Self, String> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Self::launch(binary, dir, sections, env, crate::run::random_hex(32)?)
    }

    /// Another node of the same deployment: the same configuration and secret (a token is
    /// good for both), its own ports, files in `dir`.
    pub(crate) fn another_node(&self, dir: &Path) -> Result<Self, String> {
        let sections = self.sections.clone();
        Self::launch(
            &self.binary,
            dir,
            &sections,
            self.env.clone(),
            self.secret.clone(),
        )
    }

    fn launch(
        binary: &Path,
        dir: &Path,
        sections: &str,
        env: Vec<(String, String)>,
        secret: String,
    ) -> Result<Self, String> {
        let (config, port) = write_config(dir, sections)?;
        let mut gateway = Self {
            addr: process::loopback(port),
            binary: binary.to_path_buf(),
            config,
            sections: sections.to_owned(),
            secret,
            env,
            log: dir.join("gateway.log"),
            process: None,
        };
        gateway.restart()?;
        Ok(gateway)
    }

    /// Stops the process (if running) and starts it again with the same configuration, ports
    /// and secret; returns once it listens.
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        // Dropping the old process kills it (by pid) and reaps it before the port is reused.
        self.process = None;
        let mut command = Command::new(&self.binary);
        command
            .args(["serve", "--config"])
            .arg(&self.config)
            .env(SECRET_ENV, &self.secret)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut process = Spawned::start("mcp-gateway", command, &self.log)?;
        process.wait_listening(self.addr, &self.log)?;
        self.process = Some(process);
        Ok(())
    }

    /// A token for `subject` minted by `mcp-gateway token` (valid one hour).
    pub(crate) fn token(&self, subject: &str) -> Result<String, String> {
        let mut command = Command::new(&self.binary);
        command
            .args(["token", "--config"])
            .arg(&self.config)
            .args(["--sub", subject, "--ttl", "1h"])
            .env(SECRET_ENV, &self.secret)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let (ok, out, err) =
            process::output_within("mcp-gateway token", command, Duration::from_secs(30))?;
        let token = out.trim();
        if ok && !token.is_empty() {
            Ok(token.to_owned())
        } else {
            Err(format!("mcp-gateway token failed: {err}"))
        }
    }

    /// The HS256 secret of this run (to mint deliberately bad tokens).
    pub(crate) fn secret(&self) -> &str {
        &self.secret
    }

    /// The MCP endpoint URL of virtual host `vhost`.
    pub(crate) fn url(&self, vhost: &str) -> String {
        format!("http://{}/servers/{vhost}/mcp", self.addr)
    }
}

/// Runs `serve` with `sections` (see [`RunningGateway::start_with`]) expecting it to refuse to
/// start: (it exited with a failure status, its stderr). A process still running after 30 s is
/// killed and counts as started.
pub(crate) fn serve_refused(
    binary: &Path,
    dir: &Path,
    sections: &str,
) -> Result<(bool, String), String> {
    let (config, _) = write_config(dir, sections)?;
    let mut command = Command::new(binary);
    command
        .args(["serve", "--config"])
        .arg(&config)
        .env(SECRET_ENV, crate::run::random_hex(32)?);
    let (ok, _, err) =
        process::output_within("mcp-gateway serve", command, Duration::from_secs(30))?;
    let killed = err.contains("(killed after");
    Ok((!ok && !killed, err))
}

/// Writes `dir/gateway.toml`: listeners on free ports, the JWT and security settings of the
/// run, then `sections`. Returns its path and the MCP port.
fn write_config(dir: &Path, sections: &str) -> Result<(PathBuf, u16), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let port = process::free_port()?;
    let admin = process::free_port()?;
    let config = dir.join("gateway.toml");
    let toml = format!(
        "# Generated by `cargo xtask conformance`.\n\
         [listen]\naddr = \"127.0.0.1:{port}\"\nadmin_addr = \"127.0.0.1:{admin}\"\n\n\
         [auth.jwt]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\n\
         hs256_secret_env = \"{SECRET_ENV}\"\n\n\
         [security]\nallowed_origins = [\"http://localhost\", \"http://127.0.0.1\"]\n\n\
         [telemetry]\nlog_format = \"pretty\"\nlog_level = \"info\"\n\n{sections}"
    );
    write(&config, &toml)?;
    Ok((config, port))
}

fn write(path: &Path, content: &str) -> Result<(), String> {
    std::fs::write(path, content).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
