//! `mcp-gateway`: the reference MCP gateway binary (book: docs/src/gateway.md).
//!
//! ```text
//! mcp-gateway serve --config gateway.toml          # run (also the default subcommand)
//! mcp-gateway check-config --config gateway.toml   # validate process + user config, exit 2 on error
//! mcp-gateway token --config gateway.toml --sub alice [--ttl 1h]   # mint a dev token
//! mcp-gateway config-keys                          # every key, default and environment variable
//! mcp-gateway metric-table                         # every metric of /metrics, with its labels
//! mcp-gateway users put|get|list|delete|check ...  # user configurations in the configured store
//! mcp-gateway --print-config [--config ...]        # effective configuration, secrets redacted
//! ```
//!
//! Exit codes: 0 success, 1 runtime failure (a port in use, Redis unreachable for check-config),
//! 2 invalid configuration or usage.

// A command-line program: printing its results and errors to the terminal is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cli;
mod reloading;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use mcp_gateway::config::{EffectiveConfig, GatewayConfig, RuntimeConfig, RuntimeMode};
use mcp_gateway::token::{TokenRequest, mint};
use mcp_gateway::{Gateway, GatewayError, check_config, hs256_secret};

use crate::cli::{Cli, Command, DocumentArgs, TokenArgs, UsersCommand};

/// Invalid configuration or usage.
const EXIT_CONFIG: u8 = 2;
/// A failure at run time.
const EXIT_RUNTIME: u8 = 1;

/// Every call allocates and frees about 150 small blocks, many on another worker thread than
/// the one that allocated them; with mimalloc the gateway runs 12-19 % fewer instructions per
/// operation than with glibc's allocator (book: docs/src/performance.md, "The allocator").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The file read when neither `--config` nor `MCP_GATEWAY_CONFIG` names one, if it exists.
const DEFAULT_CONFIG_FILE: &str = "gateway.toml";

fn main() -> ExitCode {
    // Explicitly, before anything can touch TLS: rustls must not guess the crypto provider.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => ExitCode::from(code),
    }
}

fn run(cli: Cli) -> Result<(), u8> {
    let command = cli.command.unwrap_or(Command::Serve);
    match command {
        Command::ConfigKeys => {
            print!("{}", mcp_gateway::config::reference_markdown());
            return Ok(());
        }
        Command::MetricTable => {
            print!("{}", mcp_gateway::metric_table());
            return Ok(());
        }
        _ => {}
    }
    let file = config_file(cli.global.config.clone());
    let effective =
        EffectiveConfig::from_sources(file.as_deref(), std::env::vars(), &cli.global.overrides())
            .map_err(|e| config_failure(&e))?;
    let built = effective.build();
    if cli.global.print_config {
        print!("{}", effective.to_toml());
        return built.map(|_| ()).map_err(|e| config_failure(&e));
    }
    let config = built.map_err(|e| config_failure(&e))?;
    for warning in effective.warnings() {
        eprintln!("mcp-gateway: warning: {warning}");
    }
    match command {
        Command::Serve => serve(
            config,
            reloading::Sources {
                file,
                overrides: cli.global.overrides(),
            },
        ),
        Command::CheckConfig => check(&config, file),
        Command::Token(args) => token(&config, &args),
        Command::ConfigKeys | Command::MetricTable => Ok(()),
        Command::Users(users_command) => users(&config, users_command),
    }
}

fn users(config: &GatewayConfig, command: UsersCommand) -> Result<(), u8> {
    use mcp_gateway::user_admin::UserAdmin;
    runtime()?.block_on(async move {
        let admin = UserAdmin::open(config).await.map_err(|e| failure(&e))?;
        match command {
            UsersCommand::Put(args) => {
                let text = read_document(&args)?;
                let report = admin.put(&args.key, &text).await.map_err(|e| failure(&e))?;
                for (source, finding) in &report.warnings {
                    eprintln!("mcp-gateway: warning: {source}: {finding}");
                }
                println!("stored the configuration of {}", args.key);
            }
            UsersCommand::Check(args) => {
                let text = read_document(&args)?;
                let report = admin
                    .check(&args.key, &text)
                    .await
                    .map_err(|e| failure(&e))?;
                for (source, finding) in &report.warnings {
                    eprintln!("mcp-gateway: warning: {source}: {finding}");
                }
                println!("configuration of {} OK", args.key);
            }
            UsersCommand::Get(args) => match admin.get(&args.key).await.map_err(|e| failure(&e))? {
                Some(json) => println!("{json}"),
                None => {
                    eprintln!("mcp-gateway: no configuration for {}", args.key);
                    return Err(EXIT_RUNTIME);
                }
            },
            UsersCommand::List => {
                for key in admin.list().await.map_err(|e| failure(&e))? {
                    println!("{key}");
                }
            }
            UsersCommand::Delete(args) => {
                if !admin.delete(&args.key).await.map_err(|e| failure(&e))? {
                    eprintln!("mcp-gateway: no configuration for {}", args.key);
                    return Err(EXIT_RUNTIME);
                }
                println!("deleted the configuration of {}", args.key);
            }
        }
        Ok(())
    })
}

/// The document of `users put|check`: `--file PATH`, or standard input (`--file -` or none).
fn read_document(args: &DocumentArgs) -> Result<String, u8> {
    use std::io::Read as _;
    let read = match args.file.as_deref() {
        Some(path) if path.as_os_str() != "-" => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display())),
        _ => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map(|_| text)
                .map_err(|e| format!("cannot read standard input: {e}"))
        }
    };
    read.map_err(|e| {
        eprintln!("mcp-gateway: {e}");
        EXIT_CONFIG
    })
}

/// `--config`, else `$MCP_GATEWAY_CONFIG`, else `./gateway.toml` when it exists.
fn config_file(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.or_else(|| {
        std::env::var_os("MCP_GATEWAY_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .or_else(|| {
        let default = PathBuf::from(DEFAULT_CONFIG_FILE);
        default.is_file().then_some(default)
    })
}

fn config_failure(error: &impl std::fmt::Display) -> u8 {
    eprintln!("mcp-gateway: invalid configuration:\n{error}");
    EXIT_CONFIG
}

fn failure(error: &GatewayError) -> u8 {
    if let GatewayError::Config(e) = error {
        return config_failure(e);
    }
    eprintln!("mcp-gateway: {error}");
    EXIT_RUNTIME
}

fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    built(tokio::runtime::Builder::new_multi_thread().enable_all())
}

/// The runtime `serve` runs on. Work-stealing: `runtime.threads` workers (0 leaves tokio's
/// default: `TOKIO_WORKER_THREADS`, else one per core). Thread-per-core: the serving threads have
/// runtimes of their own (started by `BoundGateway::serve`), and this one, on the main thread,
/// runs only the background work (admin listener, monitors, reloads, the shutdown signal).
fn serving_runtime(runtime: &RuntimeConfig) -> Result<tokio::runtime::Runtime, u8> {
    match runtime.mode {
        RuntimeMode::ThreadPerCore => {
            built(tokio::runtime::Builder::new_current_thread().enable_all())
        }
        _ => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if runtime.threads > 0 {
                builder.worker_threads(runtime.threads);
            }
            built(builder.enable_all())
        }
    }
}

fn built(builder: &mut tokio::runtime::Builder) -> Result<tokio::runtime::Runtime, u8> {
    builder.build().map_err(|e| {
        eprintln!("mcp-gateway: cannot start the async runtime: {e}");
        EXIT_RUNTIME
    })
}

fn serve(config: GatewayConfig, sources: reloading::Sources) -> Result<(), u8> {
    // Kept until the end of `serve` (the reload task shares it): dropping it flushes the last
    // spans.
    let telemetry = match mcp_gateway::init_tracing(&config.telemetry) {
        Ok(telemetry) => std::sync::Arc::new(telemetry),
        Err(e) => {
            eprintln!("mcp-gateway: {e}");
            return Err(EXIT_CONFIG);
        }
    };
    raise_open_files_limit(config.limits.max_connections);
    match &sources.file {
        Some(path) => {
            tracing::info!(config = %path.display(), version = env!("CARGO_PKG_VERSION"), "starting")
        }
        None => tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            "starting with the built-in defaults (no configuration file)"
        ),
    }
    // The content the running configuration is read from, for the file watch to compare with.
    let seen = sources
        .file
        .as_deref()
        .and_then(|file| std::fs::read(file).ok());
    let shared = std::sync::Arc::clone(&telemetry);
    let result = serving_runtime(&config.runtime)?.block_on(async move {
        // First: a SIGHUP while the gateway is built is kept for later, not the end of it.
        let hangups = reloading::hangups();
        let gateway = Gateway::from_config(config)
            .await
            .map_err(|e| failure(&e))?;
        let bound = gateway.bind().await.map_err(|e| failure(&e))?;
        let reloads = tokio::spawn(reloading::run(
            bound.gateway().reloader(),
            shared,
            sources,
            hangups,
            seen,
        ));
        let served = bound
            .serve(mcp_gateway::shutdown_signal())
            .await
            .map_err(|e| failure(&e));
        reloads.abort();
        // Its share of the telemetry is dropped before the runtime, so the last spans are
        // flushed below, on this thread.
        let _ = reloads.await;
        served
    });
    drop(telemetry);
    result
}

/// Raises the soft limit on open files to the hard limit: every client connection, backend
/// connection, stdio pipe and Redis connection is a descriptor, and the usual soft limit (1,024)
/// is far below `limits.max_connections` (book: docs/src/gateway.md, "Open files"). Warns when
/// even the hard limit leaves no room for twice `max_connections` (each client connection may
/// need a backend connection).
fn raise_open_files_limit(max_connections: usize) {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => {
            let wanted = u64::try_from(max_connections)
                .unwrap_or(u64::MAX)
                .saturating_mul(2);
            if limit < wanted {
                tracing::warn!(
                    open_files = limit,
                    max_connections,
                    "the open files limit (ulimit -n) is below twice limits.max_connections: raise the hard limit or lower max_connections, or connections will fail with EMFILE"
                );
            } else {
                tracing::debug!(open_files = limit, "open files limit");
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not raise the open files limit"),
    }
}

fn check(config: &GatewayConfig, file: Option<PathBuf>) -> Result<(), u8> {
    let report = runtime()?
        .block_on(check_config(config, true))
        .map_err(|e| failure(&e))?;
    for (source, finding) in &report.documents.unreachable {
        eprintln!("mcp-gateway: warning: {source}: {finding}");
    }
    let file = file.map_or_else(
        || "built-in defaults".to_owned(),
        |p| p.display().to_string(),
    );
    for (source, notice) in &report.documents.notices {
        eprintln!("mcp-gateway: warning: {source}: {notice}");
    }
    println!(
        "configuration OK: {file}; {} user configuration(s) checked in the {} store{}",
        report.documents.subjects,
        config.config_store.kind.as_str(),
        if report.hs256 {
            "; HS256 secret present"
        } else {
            ""
        },
    );
    Ok(())
}

fn token(config: &GatewayConfig, args: &TokenArgs) -> Result<(), u8> {
    let secret = match hs256_secret(config, None) {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            let name = config
                .auth
                .jwt
                .hs256_secret_env
                .as_deref()
                .unwrap_or("MCP_GATEWAY_JWT_SECRET");
            eprintln!(
                "mcp-gateway: no HS256 secret: set the environment variable {name} and name it in the configuration (auth.jwt.hs256_secret_env = \"{name}\")"
            );
            return Err(EXIT_CONFIG);
        }
        Err(e) => return Err(config_failure(&e)),
    };
    let mut request = TokenRequest::new(args.sub.clone()).ttl(args.ttl);
    if !args.scopes.is_empty() {
        request = request.scopes(args.scopes.iter().cloned());
    }
    if let Some(aud) = &args.aud {
        request = request.audience(aud.clone());
    }
    if let Some(iss) = &args.iss {
        request = request.issuer(iss.clone());
    }
    match mint(config, &secret, &request) {
        Ok(token) => {
            println!("{token}");
            Ok(())
        }
        Err(e) => {
            eprintln!("mcp-gateway: {e}");
            Err(EXIT_CONFIG)
        }
    }
}
