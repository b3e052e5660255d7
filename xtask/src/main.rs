//! Project automation, run as `cargo xtask <task>` (alias in `.cargo/config.toml`).
//!
//! Tasks:
//! - `test`: every test of the workspace (unit, integration, Redis-backed, end-to-end, doc tests).
//!   Installs what the tests need when it is missing and the machine allows it (`redis-server`,
//!   `haproxy`, `podman`, `promtool` and `systemd-analyze` from Debian's packages when running
//!   as root; the interop peers: Python MCP SDK 1.x and 2.x
//!   venvs in `.venv/`, the TypeScript SDK and server-everything in `tests/interop/node/`), then
//!   runs cargo-nextest (or `cargo test` when nextest is not installed) and the doc tests.
//!   First runs `features`, and type-checks every fuzz target (`fuzz.rs`); after the tests,
//!   builds the OCI image from the debug binary and runs its entrypoint (`image.rs`).
//! - `features`: each layer crate checked alone with no default features and with each feature,
//!   and every publishable crate packaged (see `features.rs`). Also run by `test`.
//! - `conformance`: the `mcp-gateway` binary against the official MCP conformance suite and
//!   real peers (see `conformance.rs`); writes `target/conformance/REPORT.md`. Also run by `test`.
//! - `ci`: `cargo fmt --check`, `cargo clippy --workspace --all-targets -D warnings`, `cargo doc
//!   --workspace --no-deps --all-features` with `-D warnings`, then `test`.
//! - `bench [--quick] [--profile] [--instructions] [--runtime MODE] [--baseline FILE]`: the
//!   gateway benchmark against direct and HAProxy (`crates/mcp-bench`, book:
//!   docs/src/performance.md), written to `target/bench/REPORT.md` and `report.json`; never part of `ci`.
//! - `book`: builds the book in `docs/` (mdBook, with its link checker) and runs its Rust snippets
//!   (see `book.rs`). Also run by `test`. `config-reference` regenerates the book's key table,
//!   `metrics-reference` its metric table.
//! - `fuzz [--seconds N] [TARGET...]`: the cargo-fuzz targets of `fuzz/` (see `fuzz.rs`), N
//!   seconds each (default 30); fails on a crash. Never part of `test` or `ci`.
//! - `image [--binary PATH] [--tag TAG] [--output DIR]`: the gateway as an OCI image built
//!   `FROM scratch` with podman, no base image pulled (see `image.rs`; default tag
//!   `mcp-gateway:<version>`, default binary a fresh release build). `test` builds one from the
//!   debug binary and runs its entrypoint (`podman run`, else chroot into the exported image);
//!   `image --check` runs that step alone.
//!
//! Under `CI=true` a missing prerequisite is a failure (the tests themselves refuse to skip);
//! elsewhere the Redis and interop tests print loudly that they skipped.

// A binary that reports to the terminal: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod book;
mod conformance;
mod features;
mod first_command;
mod fuzz;
mod image;
mod interop;
mod prerequisites;
mod run;

use std::process::ExitCode;

const HELP: &str = "\
cargo xtask <task>

Tasks:
  test    run every test (installs redis-server and the interop peers when missing and possible)
  conformance  the gateway binary against the official MCP conformance suite
               (installs Node 22 and the suite under target/conformance/; writes
               target/conformance/REPORT.md); while working on it: --only
               official,matrix,contract runs those parts, --clients NAME,... the matrix
               clients whose name contains one of them (stale entries are then not checked)
  features  each layer crate checked alone (no default features, then each feature) and
            every publishable crate packaged (cargo package --no-verify); also run by test
  ci      fmt check + clippy -D warnings + test
  bench   benchmark the release gateway (--quick: smoke; --profile: syscalls; --runtime MODE:
          the gateway's runtime.mode; --baseline FILE: compare)
  book    build the book in docs/ (mdBook + link check) and run its Rust snippets
          (installs mdbook and mdbook-linkcheck into .tools/mdbook/ when missing)
  config-reference  regenerate the key table of docs/src/configuration.md
  metrics-reference  regenerate the metric table of docs/src/telemetry.md
  fuzz    run the fuzz targets of fuzz/, N seconds each (--seconds N, default 30; TARGET...
          to pick some); installs cargo-fuzz when missing
  image   build the gateway's OCI image FROM scratch with podman, pulling nothing (--binary
          PATH: this binary instead of a release build; --tag TAG, default
          mcp-gateway:<version>; --output DIR: the staged context, default <target>/image;
          --check alone: only the image step of test)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("ci") => ci(),
        Some("features") => features::features(),
        Some("conformance") => conformance::conformance(&args[1..]),
        Some("bench") => bench::bench(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("image") => image::image(&args[1..]),
        Some("book") => book::book(),
        Some("config-reference") => book::config_reference(),
        Some("metrics-reference") => book::metrics_reference(),
        Some("-h" | "--help" | "help") | None => {
            print!("{HELP}");
            Ok(())
        }
        Some(other) => Err(format!("unknown task `{other}`\n\n{HELP}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the whole test suite; extra arguments go to nextest / cargo test as a filter.
fn test(extra: &[String]) -> Result<(), String> {
    features::features()?;
    fuzz::check_builds()?;
    prerequisites::ensure_redis_server()?;
    prerequisites::ensure_haproxy()?;
    prerequisites::ensure_promtool()?;
    prerequisites::ensure_systemd_analyze()?;
    interop::ensure_interop_peers()?;
    first_command::check()?;
    if run::has_nextest() {
        let mut args = vec![
            "nextest",
            "run",
            "--workspace",
            "--all-targets",
            "--no-fail-fast",
        ];
        args.extend(extra.iter().map(String::as_str));
        run::cargo(&args)?;
    } else {
        println!("xtask: cargo-nextest not found, using cargo test");
        let mut args = vec!["test", "--workspace", "--all-targets", "--no-fail-fast"];
        args.extend(extra.iter().map(String::as_str));
        run::cargo(&args)?;
    }
    // nextest does not run doc tests; they carry the crates' runnable examples.
    run::cargo(&["test", "--workspace", "--doc"])?;
    // After the tests: the debug binary it packs is already built.
    image::check()?;
    book::book()?;
    conformance::conformance(&[])
}

fn ci() -> Result<(), String> {
    run::cargo(&["fmt", "--all", "--", "--check"])?;
    run::cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    // The crates' API docs as docs.rs renders them: a link to a private item or to nothing is
    // an error (every feature on, so feature-gated items are documented too).
    run::cargo_with_env(
        &["doc", "--workspace", "--no-deps", "--all-features"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    test(&[])
}
