//! `mcp-bench`: runs the gateway benchmark (`run`, what `cargo xtask bench` calls) or serves an
//! echo MCP backend for manual measurements (`echo`).

// A command-line tool: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use mcp_bench::instructions::InstructionReport;
use mcp_bench::scenario::{self, Options, Plan};
use mcp_bench::{EchoBackend, Era, GatewayBin, Report, RuntimeMode};

#[derive(Parser)]
#[command(name = "mcp-bench", about = "MCP gateway benchmark harness")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every scenario against a release gateway; write REPORT.md and report.json.
    Run {
        /// The release `mcp-gateway` binary.
        #[arg(long)]
        gateway_bin: PathBuf,
        /// The gateway's `runtime.mode`.
        #[arg(long, value_enum, default_value_t = RuntimeArg::WorkStealing)]
        runtime: RuntimeArg,
        /// Where REPORT.md and report.json go.
        #[arg(long)]
        out: PathBuf,
        /// The smoke version (a minute or two).
        #[arg(long)]
        quick: bool,
        /// Also count the gateway's and HAProxy's system calls per tools/call (strace).
        #[arg(long)]
        profile: bool,
        /// A previous report.json: print now/baseline ratios.
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// The source revision measured (for the report).
        #[arg(long)]
        git_rev: Option<String>,
    },
    /// Count the gateway's instructions per operation under callgrind; write INSTRUCTIONS.md
    /// and instructions.json.
    Instructions {
        /// The release `mcp-gateway` binary.
        #[arg(long)]
        gateway_bin: PathBuf,
        /// The gateway's `runtime.mode`.
        #[arg(long, value_enum, default_value_t = RuntimeArg::WorkStealing)]
        runtime: RuntimeArg,
        /// Where INSTRUCTIONS.md and instructions.json go.
        #[arg(long)]
        out: PathBuf,
        /// A previous instructions.json: print now/baseline ratios.
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// The source revision measured (for the report).
        #[arg(long)]
        git_rev: Option<String>,
    },
    /// Serve one echo MCP backend until killed.
    Echo {
        /// Protocol era.
        #[arg(long, value_enum, default_value_t = EraArg::Modern)]
        era: EraArg,
        /// Tools in tools/list.
        #[arg(long, default_value_t = 1)]
        tools: usize,
        /// Listen address.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum RuntimeArg {
    WorkStealing,
    ThreadPerCore,
}

impl RuntimeArg {
    fn gateway(self, path: PathBuf) -> GatewayBin {
        let mut gateway = GatewayBin::new(path);
        gateway.runtime = match self {
            Self::WorkStealing => RuntimeMode::WorkStealing,
            Self::ThreadPerCore => RuntimeMode::ThreadPerCore,
        };
        gateway
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum EraArg {
    Modern,
    Legacy,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            gateway_bin,
            runtime,
            out,
            quick,
            profile,
            baseline,
            git_rev,
        } => run(
            Options {
                gateway: runtime.gateway(gateway_bin),
                git_rev,
                quick,
                profile,
                plan: if quick { Plan::quick() } else { Plan::full() },
            },
            &out,
            baseline.as_deref(),
        ),
        Command::Instructions {
            gateway_bin,
            runtime,
            out,
            baseline,
            git_rev,
        } => instructions(
            &runtime.gateway(gateway_bin),
            &out,
            baseline.as_deref(),
            git_rev,
        ),
        Command::Echo { era, tools, listen } => echo(era, tools, listen),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mcp-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn runtime(threads: usize, name: &str) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))
}

fn run(
    options: Options,
    out: &std::path::Path,
    baseline: Option<&std::path::Path>,
) -> Result<(), String> {
    let baseline = baseline.map(read_json::<Report>).transpose()?;
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    // Two runtimes: the echo backends' tasks never queue behind the load generator's.
    let backends = runtime(cores, "echo")?;
    let load = runtime(cores, "load")?;
    let progress = |line: &str| eprintln!("mcp-bench: {line}");
    let report = load.block_on(scenario::run(&options, backends.handle(), &progress))?;
    drop(load);
    drop(backends);

    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    let markdown = report.markdown(baseline.as_ref());
    write_reports(out, &json, "report.json", &markdown, "REPORT.md")?;
    // The scale curves REPORT.md links to.
    for (file, chart) in mcp_bench::curves::charts(&report) {
        if let Some(svg) = chart.svg() {
            let path = out.join(file);
            std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn write_reports(
    out: &std::path::Path,
    json: &str,
    json_name: &str,
    markdown: &str,
    md_name: &str,
) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let json_path = out.join(json_name);
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let md_path = out.join(md_name);
    std::fs::write(&md_path, markdown).map_err(|e| format!("{}: {e}", md_path.display()))?;
    // The Markdown holds the comparison against the baseline too.
    println!("{markdown}");
    println!("wrote {} and {}", md_path.display(), json_path.display());
    Ok(())
}

fn instructions(
    gateway_bin: &GatewayBin,
    out: &std::path::Path,
    baseline: Option<&std::path::Path>,
    git_rev: Option<String>,
) -> Result<(), String> {
    let baseline = baseline.map(read_json::<InstructionReport>).transpose()?;
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let backends = runtime(cores, "echo")?;
    let client = runtime(1, "client")?;
    let progress = |line: &str| eprintln!("mcp-bench: {line}");
    let report = client.block_on(mcp_bench::instructions::run(
        gateway_bin,
        git_rev,
        &out.join("callgrind"),
        backends.handle(),
        &progress,
    ))?;
    drop(client);
    drop(backends);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    let markdown = report.markdown(baseline.as_ref());
    write_reports(
        out,
        &json,
        "instructions.json",
        &markdown,
        "INSTRUCTIONS.md",
    )
}

fn echo(era: EraArg, tools: usize, listen: SocketAddr) -> Result<(), String> {
    let era = match era {
        EraArg::Modern => Era::Modern,
        EraArg::Legacy => Era::Legacy,
    };
    let rt = runtime(
        std::thread::available_parallelism().map_or(2, usize::from),
        "echo",
    )?;
    rt.block_on(async {
        let backend = EchoBackend::builder()
            .era(era)
            .tools(tools)
            .addr(listen)
            .spawn()
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        println!("MCP_BENCH_ECHO_URL={}", backend.url());
        tokio::signal::ctrl_c()
            .await
            .map_err(|e| format!("cannot wait for Ctrl-C: {e}"))
    })
}
