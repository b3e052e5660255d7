//! `cargo xtask image [--binary PATH] [--tag TAG] [--output DIR]`: the gateway as an OCI image
//! built `FROM scratch`, so that no base image has to be pulled (book: docs/src/deploying.md,
//! "The image"). The root `Containerfile` is the other way, for machines that reach a registry.
//!
//! The root filesystem is staged from this machine: the binary at `/usr/local/bin/mcp-gateway`,
//! every shared library `ldd` lists and the dynamic loader at their paths (the binary runs on
//! this machine's glibc, so it gets exactly that glibc), `/etc/passwd` and `/etc/group` with the
//! non-root user, the CA bundle (the gateway trusts the platform's roots for https backends, JWKS
//! and OTLP: `rustls-native-certs`), and the bundled configuration of `deploy/image/` in
//! `/etc/mcp-gateway/`. A generated Containerfile copies that tree into an empty image, and
//! `podman build` builds it.
//!
//! [`check`], a step of `cargo xtask test` (alone: `cargo xtask image --check`), builds an image
//! through the same staging from the debug binary the test run has already built (a cold release
//! build took 10 minutes on the 2-core machine CI runs on), then runs the image's entrypoint:
//! with `podman run` where containers can run, else (podman's runtime refuses, exit 125 or 126,
//! as it does in the sandbox of the project's machines) in the image's root filesystem, exported
//! with `podman create` + `podman export`, under `chroot --userspec` as the image's user, with
//! exactly the image's environment.
//!
//! Why this file is long: staging, the generated Containerfile, the podman calls and the two ways
//! of running the entrypoint are one procedure whose steps hand each other paths and tags, and its
//! unit tests (which keep the root `Containerfile` in line with the generated one) sit with it.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::prerequisites::{self, in_ci};
use crate::run;

/// Where the binary is in the image (the entrypoint).
const BINARY_IN_IMAGE: &str = "/usr/local/bin/mcp-gateway";
/// Where the bundled configuration is in the image (the image's `MCP_GATEWAY_CONFIG`).
const CONFIG_IN_IMAGE: &str = "/etc/mcp-gateway/gateway.toml";
/// The bundled configuration: `gateway.toml` and the `users.json` it names.
const BUNDLED_DIR: &str = "deploy/image";
const BUNDLED_FILES: &[&str] = &["gateway.toml", "users.json"];
/// The non-root user and group the gateway runs as: distroless's `nonroot` id, so that the root
/// Containerfile's image and this one run as the same user (volume permissions carry over).
const USER_ID: u32 = 65532;
const USER_NAME: &str = "mcp-gateway";
/// Debian's CA bundle; one of the paths `rustls-native-certs` probes.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The variable the bundled configuration takes the HS256 secret from.
const SECRET_ENV: &str = "MCP_GATEWAY_JWT_SECRET";

/// `cargo xtask image`.
pub(crate) fn image(args: &[String]) -> Result<(), String> {
    let options = Options::parse(args)?;
    if options.check {
        return check();
    }
    let root = run::workspace_root();
    let workspace = Workspace::read(&root)?;
    // Before the release build: without podman the minutes of building would be wasted.
    prerequisites::ensure_debian_program("podman", "no image can be built")?;
    if !run::on_path("podman") {
        return Err("podman is not installed: install it (apt-get install podman)".to_owned());
    }
    let target = crate::bench::target_dir(&root, std::env::var_os("CARGO_TARGET_DIR"));
    let binary = match options.binary {
        Some(binary) => binary,
        None => {
            run::cargo(&[
                "build",
                "--release",
                "-p",
                "mcp-gateway",
                "--bin",
                "mcp-gateway",
            ])?;
            target.join("release").join("mcp-gateway")
        }
    };
    let output = options.output.unwrap_or_else(|| target.join("image"));
    let tag = options
        .tag
        .unwrap_or_else(|| format!("mcp-gateway:{}", workspace.version));
    stage(&root, &workspace, &binary, &output)?;
    podman_build(&output, &tag)?;
    println!(
        "xtask: built image {tag} (context: {}); run it with\n  \
         podman run --rm -p 8080:8080 -p 127.0.0.1:9090:9090 -e {SECRET_ENV} {tag}",
        output.display()
    );
    Ok(())
}

/// The arguments of `cargo xtask image`.
#[derive(Debug, Default, PartialEq)]
struct Options {
    binary: Option<PathBuf>,
    tag: Option<String>,
    output: Option<PathBuf>,
    /// `--check`: only the image step of `cargo xtask test` ([`check`]).
    check: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Self::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value"))
            };
            match arg.as_str() {
                "--binary" => options.binary = Some(PathBuf::from(value("--binary")?)),
                "--tag" => options.tag = Some(value("--tag")?),
                "--output" => options.output = Some(PathBuf::from(value("--output")?)),
                "--check" => options.check = true,
                other => {
                    return Err(format!(
                        "image: unknown argument `{other}` (--binary PATH, --tag TAG, --output DIR, or --check)"
                    ));
                }
            }
        }
        // The check makes a throwaway image of its own: the other options would be ignored.
        if options.check
            && (options.binary.is_some() || options.tag.is_some() || options.output.is_some())
        {
            return Err("image: --check takes no other argument".to_owned());
        }
        Ok(options)
    }
}

/// What the image takes from the workspace manifest.
struct Workspace {
    version: String,
    license: String,
}

impl Workspace {
    fn read(root: &Path) -> Result<Self, String> {
        let path = root.join("Cargo.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn parse(text: &str) -> Result<Self, String> {
        let manifest: toml::Table = text.parse().map_err(|e| format!("{e}"))?;
        let package = manifest
            .get("workspace")
            .and_then(|w| w.get("package"))
            .ok_or("no [workspace.package]")?;
        let field = |name: &str| {
            package
                .get(name)
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("no workspace.package.{name}"))
        };
        Ok(Self {
            version: field("version")?,
            license: field("license")?,
        })
    }
}

/// Writes `output/rootfs/` (replaced when it exists) and `output/Containerfile`.
fn stage(root: &Path, workspace: &Workspace, binary: &Path, output: &Path) -> Result<(), String> {
    if !binary.is_file() {
        return Err(format!("{} is not a file", binary.display()));
    }
    // Absolute: a bare name would be looked up on PATH when run below.
    let binary = &std::fs::canonicalize(binary)
        .map_err(|e| format!("cannot resolve {}: {e}", binary.display()))?;
    // A binary of another checkout or an old build would make an image whose label lies.
    let version = binary_version(binary)?;
    if version != workspace.version {
        return Err(format!(
            "{} is version {version}, the workspace is {}: rebuild it",
            binary.display(),
            workspace.version
        ));
    }
    let libraries = shared_libraries(binary)?;
    let bundled = root.join(BUNDLED_DIR);
    let ports = bundled_ports(&bundled.join("gateway.toml"))?;
    if !Path::new(CA_BUNDLE).is_file() {
        return Err(format!(
            "{CA_BUNDLE} is missing: the image would trust no https server; \
             install it (apt-get install ca-certificates)"
        ));
    }

    let rootfs = output.join("rootfs");
    if rootfs.exists() {
        std::fs::remove_dir_all(&rootfs)
            .map_err(|e| format!("cannot remove {}: {e}", rootfs.display()))?;
    }
    copy(binary, &in_rootfs(&rootfs, BINARY_IN_IMAGE))?;
    for library in &libraries {
        // At the very path `ldd` names: the loader finds the libraries where the binary's
        // build machine put them, and the binary's interpreter path is the loader's.
        copy(library, &in_rootfs(&rootfs, &library.to_string_lossy()))?;
    }
    let config_dir = in_rootfs(&rootfs, CONFIG_IN_IMAGE);
    let config_dir = config_dir.parent().unwrap_or(&rootfs);
    for name in BUNDLED_FILES {
        copy(&bundled.join(name), &config_dir.join(name))?;
    }
    copy(Path::new(CA_BUNDLE), &in_rootfs(&rootfs, CA_BUNDLE))?;
    let etc = rootfs.join("etc");
    write(
        &etc.join("passwd"),
        &format!(
            "root:x:0:0:root:/root:/sbin/nologin\n\
             {USER_NAME}:x:{USER_ID}:{USER_ID}:{USER_NAME}:/nonexistent:/sbin/nologin\n"
        ),
    )?;
    write(
        &etc.join("group"),
        &format!("root:x:0:\n{USER_NAME}:x:{USER_ID}:\n"),
    )?;
    // /etc/hosts (which the container runtime writes) before DNS, as Debian and distroless
    // have it: glibc's built-in order without this file has changed between releases.
    write(
        &etc.join("nsswitch.conf"),
        "passwd: files\ngroup: files\nhosts: files dns\n",
    )?;
    create_dir(&rootfs.join("tmp"))?;
    normalize_permissions(&rootfs)?;
    // World-writable and sticky, as every /tmp: stdio backends and libraries may write there.
    set_mode(&rootfs.join("tmp"), 0o1777)?;
    write(
        &output.join("Containerfile"),
        &containerfile(workspace, &ports),
    )?;
    println!(
        "xtask: staged {} ({} shared libraries from ldd)",
        rootfs.display(),
        libraries.len()
    );
    Ok(())
}

/// `root` + `absolute` (an absolute path in the image).
fn in_rootfs(root: &Path, absolute: &str) -> PathBuf {
    root.join(absolute.trim_start_matches('/'))
}

/// The generated Containerfile: the staged tree into an empty image, nothing to pull.
fn containerfile(workspace: &Workspace, ports: &[u16]) -> String {
    let expose: Vec<String> = ports.iter().map(|port| format!("{port}/tcp")).collect();
    format!(
        "# Generated by `cargo xtask image` (xtask/src/image.rs): the root filesystem staged in\n\
         # rootfs/ beside this file, in an empty image; no base image is pulled.\n\
         FROM scratch\n\
         COPY rootfs/ /\n\
         # Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.\n\
         USER {USER_ID}:{USER_ID}\n\
         # Every subcommand (serve, check-config, token, users) finds the bundled configuration.\n\
         ENV PATH=/usr/local/bin MCP_GATEWAY_CONFIG={CONFIG_IN_IMAGE}\n\
         # The MCP listener and the admin listener (/metrics /healthz /readyz) of the bundled\n\
         # configuration.\n\
         EXPOSE {expose}\n\
         LABEL org.opencontainers.image.title=\"mcp-gateway\" \\\n      \
               org.opencontainers.image.description=\"A multi-tenant Model Context Protocol gateway\" \\\n      \
               org.opencontainers.image.version=\"{version}\" \\\n      \
               org.opencontainers.image.licenses=\"{license}\"\n\
         ENTRYPOINT [\"{BINARY_IN_IMAGE}\"]\n\
         CMD [\"serve\"]\n",
        expose = expose.join(" "),
        version = workspace.version,
        license = workspace.license,
    )
}

/// The ports of `listen.addr` and `listen.admin_addr` in the bundled configuration: what the
/// image exposes, read from the file so that the two cannot drift apart.
fn bundled_ports(config: &Path) -> Result<Vec<u16>, String> {
    let text = std::fs::read_to_string(config)
        .map_err(|e| format!("cannot read {}: {e}", config.display()))?;
    listen_ports(&text).map_err(|e| format!("{}: {e}", config.display()))
}

fn listen_ports(text: &str) -> Result<Vec<u16>, String> {
    let table: toml::Table = text.parse().map_err(|e| format!("{e}"))?;
    let listen = table.get("listen").ok_or("no [listen]")?;
    ["addr", "admin_addr"]
        .iter()
        .map(|key| {
            let value = listen
                .get(key)
                .and_then(toml::Value::as_str)
                .ok_or_else(|| format!("no listen.{key}"))?;
            let addr: std::net::SocketAddr = value
                .parse()
                .map_err(|e| format!("listen.{key} = {value:?}: {e}"))?;
            // A loopback listener in a container is unreachable from outside it.
            if addr.ip().is_loopback() {
                return Err(format!(
                    "listen.{key} = {value:?} is loopback: unreachable from outside a container"
                ));
            }
            Ok(addr.port())
        })
        .collect()
}

/// The version `binary --version` prints (`mcp-gateway X`).
fn binary_version(binary: &Path) -> Result<String, String> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout.trim().strip_prefix("mcp-gateway ") {
        Some(version) if output.status.success() => Ok(version.to_owned()),
        _ => Err(format!(
            "`{} --version` printed {:?} ({}): not an mcp-gateway binary",
            binary.display(),
            stdout.trim(),
            output.status
        )),
    }
}

/// Every shared library `ldd` lists for `binary`, the dynamic loader included.
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("cannot run ldd: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // ldd exits 1 for a static binary ("not a dynamic executable"): nothing to copy.
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stdout.contains("statically linked") || stderr.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(format!(
            "`ldd {}` failed ({}): {}",
            binary.display(),
            output.status,
            stderr.trim()
        ));
    }
    parse_ldd(&stdout)
}

/// The paths in `ldd` output: `name => /path (0x...)` lines and the loader's `/path (0x...)`
/// line. The vDSO has no file; a library ldd did not find is an error (the image would not run).
fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    return Err(format!(
                        "ldd: {} not found: the binary cannot run here",
                        name.trim()
                    ));
                }
                rest.split_whitespace().next()
            }
            None => line.split_whitespace().next(),
        };
        match path {
            Some(path) if path.starts_with('/') => paths.push(PathBuf::from(path)),
            // linux-vdso.so.1 (in the kernel), "statically linked": no file.
            _ => {}
        }
    }
    paths.dedup();
    Ok(paths)
}

/// `podman build` of the staged context. `--pull=never`: the build must not reach a registry,
/// and `FROM scratch` needs none; `--layers=false`: one commit, no intermediate images left.
fn podman_build(context: &Path, tag: &str) -> Result<(), String> {
    let containerfile = context.join("Containerfile");
    run::program(
        "podman",
        &[
            "build",
            "--pull=never",
            "--layers=false",
            "--format",
            "oci",
            "--tag",
            tag,
            "--file",
            &path_arg(&containerfile)?,
            &path_arg(context)?,
        ],
    )
}

/// The image test of `cargo xtask test`: builds an image from the debug binary through
/// [`stage`] and runs its entrypoint (see the module documentation).
pub(crate) fn check() -> Result<(), String> {
    prerequisites::ensure_debian_program("podman", "the image test will skip")?;
    if !run::on_path("podman") {
        return Ok(());
    }
    let root = run::workspace_root();
    let workspace = Workspace::read(&root)?;
    // The binary the test run has already built: no second build of the gateway.
    run::cargo(&[
        "build",
        "--quiet",
        "-p",
        "mcp-gateway",
        "--bin",
        "mcp-gateway",
    ])?;
    let binary = crate::bench::target_dir(&root, std::env::var_os("CARGO_TARGET_DIR"))
        .join("debug")
        .join("mcp-gateway");
    let scratch = Scratch::new()?;
    let context = scratch.dir.join("context");
    stage(&root, &workspace, &binary, &context)?;
    podman_build(&context, &scratch.tag)?;
    let config = ImageConfig::inspect(&scratch.tag)?;
    config.verify(
        &workspace,
        &bundled_ports(&root.join(BUNDLED_DIR).join("gateway.toml"))?,
    )?;

    // `podman run` first; where the container runtime refuses to start containers (here: crun
    // cannot set its rlimits or cgroups in this sandbox), the exported root filesystem.
    let expected = format!("mcp-gateway {}", workspace.version);
    let mut runner = Runner::Podman {
        image: scratch.tag.clone(),
    };
    let mut version = runner.run(&["--version"], &[])?;
    if let Some(code @ (125 | 126)) = version.status.code() {
        let why = String::from_utf8_lossy(&version.stderr);
        println!(
            "xtask: image test: `podman run` fails on this machine (exit {code}: {}); \
             running the entrypoint in the image's exported root filesystem with chroot",
            why.trim()
        );
        if !prerequisites::is_root() {
            let message = "the chroot fallback of the image test needs root";
            if in_ci() {
                return Err(message.to_owned());
            }
            println!("xtask: WARNING: {message}; the image's entrypoint was not run");
            return Ok(());
        }
        let chroot = find_on_path("chroot").ok_or("chroot is not on PATH (coreutils)")?;
        runner = Runner::Chroot {
            chroot,
            rootfs: scratch.export()?,
            config: config.clone(),
        };
        version = runner.run(&["--version"], &[])?;
    } else {
        println!("xtask: image test: running the entrypoint with `podman run`");
    }
    expect(&version, 0, "--version")?;
    let printed = String::from_utf8_lossy(&version.stdout);
    if printed.trim() != expected {
        return Err(format!(
            "image: `--version` printed {:?}, expected {expected:?}",
            printed.trim()
        ));
    }

    let secret = run::random_hex(32)?;
    let checked = runner.run(
        &["check-config", "--config", CONFIG_IN_IMAGE],
        &[(SECRET_ENV, &secret)],
    )?;
    expect(&checked, 0, "check-config --config")?;
    let printed = String::from_utf8_lossy(&checked.stdout);
    let ok = format!("configuration OK: {CONFIG_IN_IMAGE}");
    if !printed.contains(&ok) || !printed.contains("HS256 secret present") {
        return Err(format!(
            "image: check-config printed {:?}, expected {ok:?} and the HS256 secret",
            printed.trim()
        ));
    }

    // No --config: the image's MCP_GATEWAY_CONFIG names the bundled file, and without the
    // secret in the environment it must refuse: the image carries no key of its own.
    let refused = runner.run(&["check-config"], &[])?;
    expect(&refused, 2, "check-config without the secret")?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    if !stderr.contains(&format!("{SECRET_ENV} is not set")) || !stderr.contains(CONFIG_IN_IMAGE) {
        return Err(format!(
            "image: check-config without {SECRET_ENV} printed {:?}",
            stderr.trim()
        ));
    }
    println!(
        "xtask: image test: {} runs as {} in the image ({}): --version, check-config with and without the secret",
        BINARY_IN_IMAGE,
        config.user,
        runner.name()
    );
    Ok(())
}

/// A unique tag and temporary directory for one test run, removed on drop with the test
/// image and the exported container, whatever failed.
struct Scratch {
    dir: PathBuf,
    tag: String,
    container: String,
}

impl Scratch {
    fn new() -> Result<Self, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let unique = format!("{}-{nanos}", std::process::id());
        let dir = std::env::temp_dir().join(format!("mcp-gateway-image-test-{unique}"));
        create_dir(&dir)?;
        Ok(Self {
            dir,
            tag: format!("localhost/mcp-gateway-image-test:{unique}"),
            container: format!("mcp-gateway-image-test-{unique}"),
        })
    }

    /// The image's root filesystem in `dir/rootfs`, through a created (never started)
    /// container: creating and exporting need no container runtime.
    fn export(&self) -> Result<PathBuf, String> {
        run::program("podman", &["create", "--name", &self.container, &self.tag])?;
        let tar = self.dir.join("rootfs.tar");
        let exported = run::program(
            "podman",
            &["export", "--output", &path_arg(&tar)?, &self.container],
        );
        quiet_podman(&["rm", "--force", &self.container]);
        exported?;
        let rootfs = self.dir.join("rootfs");
        create_dir(&rootfs)?;
        // Numeric owners and modes as in the image: root-owned files the user cannot change.
        run::program(
            "tar",
            &[
                "--numeric-owner",
                "--same-permissions",
                "-xf",
                &path_arg(&tar)?,
                "-C",
                &path_arg(&rootfs)?,
            ],
        )?;
        std::fs::remove_file(&tar).map_err(|e| format!("cannot remove {}: {e}", tar.display()))?;
        Ok(rootfs)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        quiet_podman(&["rm", "--force", "--ignore", &self.container]);
        // Absent when the build failed: nothing to remove, nothing to warn about.
        if quiet_podman(&["image", "exists", &self.tag])
            && !quiet_podman(&["rmi", "--force", &self.tag])
        {
            println!(
                "xtask: WARNING: could not remove the test image {}",
                self.tag
            );
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            println!("xtask: WARNING: cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// Runs `podman args` with its output discarded; whether it succeeded.
fn quiet_podman(args: &[&str]) -> bool {
    Command::new("podman")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The parts of `podman image inspect` the test runs and checks.
#[derive(Clone, Debug)]
struct ImageConfig {
    user: String,
    env: Vec<(String, String)>,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    exposed: Vec<String>,
    version_label: Option<String>,
}

impl ImageConfig {
    fn inspect(image: &str) -> Result<Self, String> {
        let output = Command::new("podman")
            .args(["image", "inspect", image])
            .output()
            .map_err(|e| format!("cannot run podman: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "`podman image inspect {image}` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Self::parse(&String::from_utf8_lossy(&output.stdout))
    }

    fn parse(json: &str) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("podman image inspect: {e}"))?;
        let config = value
            .get(0)
            .and_then(|image| image.get("Config"))
            .ok_or("podman image inspect: no Config")?;
        let strings = |key: &str| -> Vec<String> {
            config
                .get(key)
                .and_then(serde_json::Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let env = strings("Env")
            .into_iter()
            .filter_map(|pair| {
                pair.split_once('=')
                    .map(|(name, value)| (name.to_owned(), value.to_owned()))
            })
            .collect();
        let mut exposed: Vec<String> = config
            .get("ExposedPorts")
            .and_then(serde_json::Value::as_object)
            .map(|ports| ports.keys().cloned().collect())
            .unwrap_or_default();
        exposed.sort();
        Ok(Self {
            user: config
                .get("User")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            env,
            entrypoint: strings("Entrypoint"),
            cmd: strings("Cmd"),
            exposed,
            version_label: config
                .get("Labels")
                .and_then(|labels| labels.get("org.opencontainers.image.version"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        })
    }

    /// The image as the generated Containerfile means it: non-root, the binary as entrypoint,
    /// `serve` by default, the bundled configuration, its ports, the workspace version.
    fn verify(&self, workspace: &Workspace, ports: &[u16]) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.user != format!("{USER_ID}:{USER_ID}") {
            problems.push(format!("user {:?}", self.user));
        }
        if self.entrypoint != [BINARY_IN_IMAGE] {
            problems.push(format!("entrypoint {:?}", self.entrypoint));
        }
        if self.cmd != ["serve"] {
            problems.push(format!("cmd {:?}", self.cmd));
        }
        let config = self
            .env
            .iter()
            .find(|(name, _)| name == "MCP_GATEWAY_CONFIG");
        if config.map(|(_, value)| value.as_str()) != Some(CONFIG_IN_IMAGE) {
            problems.push(format!("MCP_GATEWAY_CONFIG {config:?}"));
        }
        let mut expected: Vec<String> = ports.iter().map(|p| format!("{p}/tcp")).collect();
        expected.sort();
        if self.exposed != expected {
            problems.push(format!("exposed ports {:?}", self.exposed));
        }
        if self.version_label.as_deref() != Some(workspace.version.as_str()) {
            problems.push(format!("version label {:?}", self.version_label));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("image: unexpected {}", problems.join(", ")))
        }
    }
}

/// How the test runs the image's entrypoint.
enum Runner {
    /// `podman run`: the real thing.
    Podman { image: String },
    /// The exported root filesystem under chroot, as the image's user, with the image's
    /// environment and nothing of this process's.
    Chroot {
        /// Found on this process's `PATH`: the child's is the image's, which has no chroot.
        chroot: PathBuf,
        rootfs: PathBuf,
        config: ImageConfig,
    },
}

impl Runner {
    fn name(&self) -> &'static str {
        match self {
            Self::Podman { .. } => "podman run",
            Self::Chroot { .. } => "chroot into the exported root filesystem",
        }
    }

    /// The entrypoint with `args`, `env` added to the image's environment; its output.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Result<Output, String> {
        let mut command = match self {
            Self::Podman { image } => {
                let mut command = Command::new("podman");
                // `--env NAME` takes the value from podman's environment: no secret on the
                // command line.
                command.args(["run", "--rm", "--network", "none"]);
                for (name, _) in env {
                    command.args(["--env", name]);
                }
                command.arg(image).args(args);
                command
            }
            Self::Chroot {
                chroot,
                rootfs,
                config,
            } => {
                let mut command = Command::new(chroot);
                command
                    .arg(format!("--userspec={}", config.user))
                    .arg(rootfs)
                    .args(&config.entrypoint)
                    .args(args)
                    .env_clear()
                    .envs(config.env.iter().map(|(n, v)| (n.as_str(), v.as_str())));
                command
            }
        };
        command.envs(env.iter().copied());
        println!("xtask: image test: {} {}", self.name(), args.join(" "));
        command
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.name()))
    }
}

/// Fails unless `output` exited with `code`, showing what it printed.
fn expect(output: &Output, code: i32, what: &str) -> Result<(), String> {
    if output.status.code() == Some(code) {
        return Ok(());
    }
    Err(format!(
        "image: `{what}` exited with {} (expected {code})\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout).trim(),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// The first `program` on this process's `PATH`.
fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    })
}

/// Copies a file (its content: symbolic links are followed), creating the parent directories.
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        create_dir(parent)?;
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn write(path: &Path, content: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        create_dir(parent)?;
    }
    std::fs::write(path, content).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn create_dir(path: &Path) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))
}

/// Directories 0755, executables 0755, other files 0644, whatever the umask and the source
/// files' modes: everything readable by the image's user, nothing writable by it.
fn normalize_permissions(dir: &Path) -> Result<(), String> {
    set_mode(dir, 0o755)?;
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let path = entry.path();
        let metadata = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if metadata.is_dir() {
            normalize_permissions(&path)?;
        } else if metadata.is_file() {
            let executable = metadata.permissions().mode() & 0o111 != 0;
            set_mode(&path, if executable { 0o755 } else { 0o644 })?;
        }
    }
    Ok(())
}

fn path_arg(path: &Path) -> Result<String, String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> Workspace {
        Workspace {
            version: "1.2.3".to_owned(),
            license: "MIT OR Apache-2.0".to_owned(),
        }
    }

    #[test]
    fn ldd_output_gives_every_library_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd5a9f2000)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0c1a2f0000)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c1a000000)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f0c1a400000)\n";
        assert_eq!(
            parse_ldd(text),
            Ok(vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ])
        );
        assert_eq!(parse_ldd("\tstatically linked\n"), Ok(Vec::new()));
        let missing = parse_ldd("\tlibfoo.so.1 => not found\n");
        assert!(missing.is_err_and(|e| e.contains("libfoo.so.1")));
    }

    #[test]
    fn the_generated_containerfile_pulls_nothing_and_runs_as_the_user() {
        let text = containerfile(&workspace(), &[8080, 9090]);
        let instructions: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with(' '))
            .collect();
        assert_eq!(instructions.first(), Some(&"FROM scratch"));
        assert!(
            !text.contains("RUN "),
            "a RUN step needs a container runtime"
        );
        assert!(instructions.contains(&"USER 65532:65532"));
        assert!(instructions.contains(&"EXPOSE 8080/tcp 9090/tcp"));
        assert!(text.contains("org.opencontainers.image.version=\"1.2.3\""));
        assert!(instructions.contains(&"ENTRYPOINT [\"/usr/local/bin/mcp-gateway\"]"));
        assert!(instructions.contains(&"CMD [\"serve\"]"));
    }

    #[test]
    fn the_bundled_configuration_listens_beyond_loopback() {
        let root = run::workspace_root();
        let ports = bundled_ports(&root.join(BUNDLED_DIR).join("gateway.toml"));
        assert_eq!(ports, Ok(vec![8080, 9090]));
        assert!(
            listen_ports("[listen]\naddr = \"127.0.0.1:8080\"\nadmin_addr = \"0.0.0.0:1\"\n")
                .is_err()
        );
    }

    /// The root Containerfile (for users with registry access) and this image agree on the
    /// ports, the configuration, the user and the entrypoint.
    #[test]
    fn the_root_containerfile_matches_the_generated_one() {
        let root = run::workspace_root();
        let text = std::fs::read_to_string(root.join("Containerfile")).unwrap_or_default();
        let ports = bundled_ports(&root.join(BUNDLED_DIR).join("gateway.toml")).unwrap_or_default();
        let expose: Vec<String> = ports.iter().map(|p| format!("{p}/tcp")).collect();
        for line in [
            format!("EXPOSE {}", expose.join(" ")),
            format!("USER {USER_ID}:{USER_ID}"),
            format!("ENTRYPOINT [\"{BINARY_IN_IMAGE}\"]"),
            "CMD [\"serve\"]".to_owned(),
            format!("COPY {BUNDLED_DIR}/ /etc/mcp-gateway/"),
        ] {
            assert!(
                text.lines().any(|l| l.trim() == line),
                "the root Containerfile lacks `{line}`"
            );
        }
        assert!(text.contains(&format!("MCP_GATEWAY_CONFIG={CONFIG_IN_IMAGE}")));
    }

    #[test]
    fn the_workspace_version_and_license_are_read() {
        let parsed = Workspace::parse(
            "[workspace.package]\nversion = \"0.2.0\"\nlicense = \"MIT OR Apache-2.0\"\n",
        );
        assert!(parsed.is_ok_and(|w| w.version == "0.2.0" && w.license == "MIT OR Apache-2.0"));
        assert!(Workspace::parse("[package]\nversion = \"1\"\n").is_err());
    }

    #[test]
    fn arguments_are_parsed() {
        let args: Vec<String> = ["--binary", "b", "--tag", "t:1", "--output", "o"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(
            Options::parse(&args),
            Ok(Options {
                binary: Some(PathBuf::from("b")),
                tag: Some("t:1".to_owned()),
                output: Some(PathBuf::from("o")),
                check: false,
            })
        );
        assert!(Options::parse(&["--check".to_owned()]).is_ok_and(|o| o.check));
        assert!(
            Options::parse(&["--check".to_owned(), "--tag".to_owned(), "t".to_owned()]).is_err()
        );
        assert!(Options::parse(&["--tag".to_owned()]).is_err());
        assert!(Options::parse(&["--bogus".to_owned()]).is_err());
    }

    #[test]
    fn the_inspected_configuration_is_verified() {
        let json = r#"[{"Config": {"User": "65532:65532",
            "Env": ["PATH=/usr/local/bin", "MCP_GATEWAY_CONFIG=/etc/mcp-gateway/gateway.toml"],
            "Entrypoint": ["/usr/local/bin/mcp-gateway"], "Cmd": ["serve"],
            "ExposedPorts": {"9090/tcp": {}, "8080/tcp": {}},
            "Labels": {"org.opencontainers.image.version": "1.2.3"}}}]"#;
        let config = ImageConfig::parse(json);
        assert!(config.as_ref().is_ok_and(|c| c.env.len() == 2));
        let config = config.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.verify(&workspace(), &[8080, 9090]), Ok(()));
        assert!(config.verify(&workspace(), &[8080]).is_err());
    }
}
