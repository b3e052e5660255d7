//! The benchmark itself: start echo backends, gateway processes and HAProxy, run every scenario
//! with rotating A/B rounds (so machine drift hits every side alike), and fill a [`Report`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::RedisServer;
use serde_json::json;
use tokio::runtime::Handle;

use crate::client::McpClient;
use crate::echo::EchoBackend;
use crate::gateway::{GatewayBin, GatewayProcess, SessionStoreKind};
use crate::haproxy::HaproxyProcess;
use crate::load::{self, LoadResult, Operation, Pace, Workload};
use crate::proc_stats;
use crate::protocol::{Endpoint, Era};
use crate::report::{Comparison, Memory, Meta, PluginRun, Report, SessionScale, StoreRun};
use crate::syscalls::Strace;

/// How long and how much to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    /// A/B rounds per comparison (sides alternate their order each round).
    pub rounds: usize,
    /// Unmeasured time before each run.
    pub warmup: Duration,
    /// Measured time per run.
    pub duration: Duration,
    /// Client counts of the closed-loop `tools/call` runs.
    pub concurrencies: Vec<usize>,
    /// Backend counts of the `tools/list` fan-out runs.
    pub fanouts: Vec<usize>,
    /// Tools each fan-out backend lists.
    pub fanout_tools: usize,
    /// Legacy sessions held open for the memory figures, one count after another (the first
    /// is the report's `memory` figure; all of them its session scale curve).
    pub sessions: Vec<usize>,
}

impl Plan {
    /// The full benchmark (a few minutes).
    #[must_use]
    pub fn full() -> Self {
        Self {
            rounds: 3,
            warmup: Duration::from_millis(300),
            duration: Duration::from_secs(2),
            concurrencies: vec![1, 4, 16, 64, 256],
            fanouts: vec![1, 4, 16, 64],
            fanout_tools: 20,
            sessions: vec![10_000, 100_000],
        }
    }

    /// The `--quick` smoke version (a minute or two).
    #[must_use]
    pub fn quick() -> Self {
        Self {
            rounds: 1,
            warmup: Duration::from_millis(200),
            duration: Duration::from_millis(800),
            concurrencies: vec![1, 16, 64],
            fanouts: vec![1, 4, 16],
            sessions: vec![2_000],
            ..Self::full()
        }
    }
}

/// What the benchmark needs from its caller.
#[derive(Clone, Debug)]
pub struct Options {
    /// The release `mcp-gateway` binary and its runtime mode.
    pub gateway: GatewayBin,
    /// The source revision measured (for the report).
    pub git_rev: Option<String>,
    /// Whether this is the `--quick` smoke run.
    pub quick: bool,
    /// `--profile`: also count the gateway's and HAProxy's system calls per `tools/call`.
    pub profile: bool,
    /// Durations and sizes.
    pub plan: Plan,
}

/// Progress lines go to the caller (a binary prints them; the library does not).
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

/// Runs every scenario. Echo backends run on `backends` (their own runtime, so their work does
/// not queue behind the load generator's tasks).
///
/// # Errors
///
/// When a backend or a gateway cannot be started, or nothing could be measured.
pub async fn run(
    options: &Options,
    backends: &Handle,
    progress: Progress<'_>,
) -> Result<Report, String> {
    let plan = &options.plan;
    let mut report = Report {
        meta: Meta {
            date: utc_now(),
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            cpu: cpu_model(),
            git_rev: options.git_rev.clone(),
            runtime: options.gateway.runtime.as_str().to_owned(),
            quick: options.quick,
            rounds: plan.rounds,
            seconds_per_run: plan.duration.as_secs_f64(),
        },
        ..Report::default()
    };

    let servers = EchoServers::start(backends, &plan.fanouts, plan.fanout_tools).await?;
    let (modern, legacy, fan) = (&servers.modern, &servers.legacy, &servers.fan);
    let targets = servers.call_targets();
    let users = users_json(&targets, fan, &plan.fanouts);

    progress("starting the gateway (local session store)");
    let gateway = GatewayProcess::start(&options.gateway, &SessionStoreKind::Local, &users, None)
        .map_err(|e| e.to_string())?;
    let haproxy = match proc_stats::find_program("haproxy") {
        Some(bin) => {
            progress("starting haproxy in front of the tools/call backends");
            let addrs: Vec<SocketAddr> = targets.iter().map(|t| t.addr).collect();
            Some(HaproxyProcess::start(&bin, &addrs).map_err(|e| e.to_string())?)
        }
        None => {
            let note = "haproxy not found: tools/call was NOT measured through HAProxy, so \
                        there is no floor to compare with (install haproxy; `cargo xtask bench` \
                        does when it can)";
            progress(&format!("WARNING: {note}"));
            report.notes.push(note.to_owned());
            None
        }
    };
    let strace = if options.profile {
        let found = proc_stats::find_program("strace");
        if found.is_none() {
            let note = "strace not found: `--profile` counted NO system calls (install strace)";
            progress(&format!("WARNING: {note}"));
            report.notes.push(note.to_owned());
        }
        found
    } else {
        None
    };
    let bench = Bench {
        plan: plan.clone(),
        load_max_rss: Arc::new(AtomicU64::new(0)),
        strace,
        notes: Mutex::new(Vec::new()),
    };
    warm_up(&gateway, &targets, &plan.fanouts).await?;

    progress("memory: idle and with open legacy sessions");
    report.memory = bench.memory(&gateway).await?;

    for (index, target) in targets.iter().enumerate() {
        for &concurrency in &plan.concurrencies {
            progress(&format!("{}, {concurrency} client(s)", target.scenario));
            let call = |endpoint: Endpoint| {
                bench.workload(vec![endpoint], target.era, Operation::CallTool, concurrency)
            };
            let proxied = haproxy.as_ref().and_then(|proxy| {
                let front = proxy.front(index)?;
                Some((call(Endpoint::new(front, "/mcp")), proxy))
            });
            let comparison = bench
                .compare(
                    &target.scenario,
                    call(Endpoint::new(target.addr, "/mcp")),
                    call(through(&gateway, target.vhost, "echo-echo")),
                    &gateway,
                    proxied,
                    true,
                )
                .await;
            report.tool_calls.push(comparison);
        }
    }
    // Idle from here on, but one process fewer on a small machine.
    drop(haproxy);

    // Open loop at half the gateway's closed-loop throughput with 16 clients: a moderate load
    // at which added latency, not saturation, is what shows.
    let reference = report
        .tool_calls
        .iter()
        .find(|c| c.scenario == "tools/call modern" && c.concurrency == 16)
        .or_else(|| report.tool_calls.first())
        .map_or(1000.0, |c| c.gateway.rps);
    let rate = (reference * 0.5).max(100.0).round();
    progress(&format!("tools/call modern, open loop at {rate}/s"));
    let mut direct_open =
        bench.workload(vec![direct(modern)], Era::Modern, Operation::CallTool, 16);
    direct_open.pace = Pace::Open { rate };
    let mut gateway_open = direct_open.clone();
    gateway_open.endpoints = vec![through(&gateway, "modern", "echo-echo")];
    let mut open = bench
        .compare(
            "tools/call modern",
            direct_open,
            gateway_open,
            &gateway,
            None,
            false,
        )
        .await;
    open.rate = Some(rate);
    report.open_loop.push(open);

    for &n in &plan.fanouts {
        progress(&format!("tools/list fan-out over {n} backend(s)"));
        let direct_eps = fan.iter().take(n).map(direct).collect();
        let gateway_ep = through(&gateway, &format!("fan{n}"), "");
        let comparison = bench
            .compare(
                &format!("tools/list fan-out x{n}"),
                bench.workload(direct_eps, Era::Modern, Operation::ListTools, 1),
                bench.workload(vec![gateway_ep], Era::Modern, Operation::ListTools, 1),
                &gateway,
                None,
                false,
            )
            .await;
        report.fanout.push(comparison);
    }

    // The session machinery alone, and the performance issue's cycle with a list in it.
    for (name, operation) in [
        ("legacy session setup", Operation::SessionCycle),
        (
            "legacy session cycle with tools/list",
            Operation::SessionCycleWithList,
        ),
    ] {
        progress(&format!("{name} rate (8 clients)"));
        let rate = bench
            .compare(
                name,
                bench.workload(vec![direct(legacy)], Era::Legacy, operation, 8),
                bench.workload(
                    vec![through(&gateway, "legacy", "echo-echo")],
                    Era::Legacy,
                    operation,
                    8,
                ),
                &gateway,
                None,
                false,
            )
            .await;
        report.rates.push(rate);
    }
    progress("server/discover rate (8 clients)");
    let discover = bench
        .compare(
            "server/discover",
            bench.workload(vec![direct(modern)], Era::Modern, Operation::Discover, 8),
            bench.workload(
                vec![through(&gateway, "modern", "")],
                Era::Modern,
                Operation::Discover,
                8,
            ),
            &gateway,
            None,
            false,
        )
        .await;
    report.rates.push(discover);

    progress("session stores: local, redis, sealed");
    let redis = RedisServer::start().await;
    if redis.is_none() {
        let note = "redis-server not found: the Redis session store was NOT measured (install \
                    redis-server or set REDIS_URL)";
        progress(&format!("WARNING: {note}"));
        report.notes.push(note.to_owned());
    }
    let mut stores = vec![(SessionStoreKind::Local, None)];
    if let Some(redis) = &redis {
        let kind = SessionStoreKind::Redis(redis.url().to_owned());
        let gw = GatewayProcess::start(&options.gateway, &kind, &users, None)
            .map_err(|e| e.to_string())?;
        stores.push((kind, Some(gw)));
    }
    let sealed = GatewayProcess::start(&options.gateway, &SessionStoreKind::Sealed, &users, None)
        .map_err(|e| e.to_string())?;
    stores.push((SessionStoreKind::Sealed, Some(sealed)));
    let gateways: Vec<(String, &GatewayProcess)> = stores
        .iter()
        .map(|(kind, gw)| (kind.to_string(), gw.as_ref().unwrap_or(&gateway)))
        .collect();
    report.session_stores = bench.stores(&gateways).await;

    progress("plugins: tools/call modern with 0, 1 and 5 plugins");
    let mut with_plugins = Vec::new();
    for count in [1, 5] {
        let gw = GatewayProcess::start(
            &options.gateway,
            &SessionStoreKind::Local,
            &users,
            Some(&plugin_document(count)),
        )
        .map_err(|e| e.to_string())?;
        warm_up(&gw, &targets, &plan.fanouts).await?;
        with_plugins.push((count, gw));
    }
    let mut plugin_gateways = vec![(0, &gateway)];
    plugin_gateways.extend(with_plugins.iter().map(|(n, gw)| (*n, gw)));
    report.plugins = bench.plugins(&plugin_gateways).await;

    report.memory.load_max_rss = bench.load_max_rss.load(Ordering::Relaxed);
    report.memory.end_rss = gateway.rss_bytes().unwrap_or(0);
    if plan.sessions.len() > 1 {
        progress("session scale: idle legacy sessions on a fresh gateway");
        // A gateway of its own: the memory a large count leaves in the allocator after its
        // sessions are deleted must not count as the main gateway's RSS under load.
        let fresh = GatewayProcess::start(&options.gateway, &SessionStoreKind::Local, &users, None)
            .map_err(|e| e.to_string())?;
        warm_up(&fresh, &targets, &plan.fanouts).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let idle_rss = fresh.rss_bytes().unwrap_or(0);
        for &count in &plan.sessions[1..] {
            report
                .memory
                .scale
                .push(open_idle_sessions(&fresh, count, idle_rss).await?);
        }
    }
    report.notes.extend(
        bench
            .notes
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner),
    );
    report.finish();
    Ok(report)
}

/// The echo backends every scenario talks to: one of each era on plain hyper, one of each built
/// with rmcp (a real SDK server, answering over SSE), and the fan-out backends.
pub(crate) struct EchoServers {
    pub(crate) modern: EchoBackend,
    pub(crate) legacy: EchoBackend,
    pub(crate) rmcp_modern: TestBackend,
    pub(crate) rmcp_legacy: TestBackend,
    pub(crate) fan: Vec<EchoBackend>,
}

impl EchoServers {
    /// Starts them on `backends` (their own runtime, so their work does not queue behind the
    /// load generator's tasks): as many fan-out backends as the largest of `fanouts`, each
    /// listing `fanout_tools` tools.
    pub(crate) async fn start(
        backends: &Handle,
        fanouts: &[usize],
        fanout_tools: usize,
    ) -> Result<Self, String> {
        let spawn = |era: Era, tools: usize| {
            backends
                .spawn(async move { EchoBackend::builder().era(era).tools(tools).spawn().await })
        };
        let rmcp = |spec: BackendSpec| {
            backends.spawn(async move { TestBackend::try_start(spec.record_requests(false)).await })
        };
        let joined = |e: tokio::task::JoinError| e.to_string();
        let modern = spawn(Era::Modern, 1)
            .await
            .map_err(joined)?
            .map_err(|e| e.to_string())?;
        let legacy = spawn(Era::Legacy, 1)
            .await
            .map_err(joined)?
            .map_err(|e| e.to_string())?;
        let max_fanout = fanouts.iter().copied().max().unwrap_or(1);
        let mut fan = Vec::with_capacity(max_fanout);
        for _ in 0..max_fanout {
            fan.push(
                spawn(Era::Modern, fanout_tools)
                    .await
                    .map_err(joined)?
                    .map_err(|e| e.to_string())?,
            );
        }
        let rmcp_modern = rmcp(BackendSpec::modern("echo"))
            .await
            .map_err(joined)?
            .map_err(|e| e.to_string())?;
        let rmcp_legacy = rmcp(BackendSpec::legacy("echo"))
            .await
            .map_err(joined)?
            .map_err(|e| e.to_string())?;
        Ok(Self {
            modern,
            legacy,
            rmcp_modern,
            rmcp_legacy,
            fan,
        })
    }

    /// The `tools/call` targets: hyper modern, hyper legacy, rmcp modern, rmcp legacy.
    pub(crate) fn call_targets(&self) -> [CallTarget; 4] {
        [
            CallTarget::new("", Era::Modern, self.modern.addr(), "modern"),
            CallTarget::new("", Era::Legacy, self.legacy.addr(), "legacy"),
            CallTarget::new(
                " (rmcp)",
                Era::Modern,
                self.rmcp_modern.addr(),
                "rmcp-modern",
            ),
            CallTarget::new(
                " (rmcp)",
                Era::Legacy,
                self.rmcp_legacy.addr(),
                "rmcp-legacy",
            ),
        ]
    }
}

struct Bench {
    plan: Plan,
    /// Largest gateway RSS sampled during any gateway-side load run.
    load_max_rss: Arc<AtomicU64>,
    /// `--profile` with `strace` found: the binary.
    strace: Option<PathBuf>,
    /// What went wrong without spoiling the run (a failed `--profile` trace), for the report.
    notes: Mutex<Vec<String>>,
}

/// A backend the `tools/call` scenarios measure: direct, through the gateway's virtual host
/// `vhost` (one backend named `echo`) and through HAProxy.
pub(crate) struct CallTarget {
    pub(crate) scenario: String,
    pub(crate) era: Era,
    addr: SocketAddr,
    pub(crate) vhost: &'static str,
}

impl CallTarget {
    fn new(suffix: &str, era: Era, addr: SocketAddr, vhost: &'static str) -> Self {
        Self {
            scenario: format!("tools/call {era}{suffix}"),
            era,
            addr,
            vhost,
        }
    }
}

/// Whose CPU time a load run also measures.
#[derive(Clone, Copy)]
enum Watched {
    /// Nobody's: the direct side.
    Nothing,
    /// The gateway's, whose RSS is sampled as well.
    Gateway(u32),
    /// HAProxy's.
    Proxy(u32),
}

/// One measured side: its merged load results and the gateway's CPU time over them.
struct Side {
    result: Option<LoadResult>,
    cpu: Duration,
    cpu_ops: u64,
}

impl Side {
    fn new() -> Self {
        Self {
            result: None,
            cpu: Duration::ZERO,
            cpu_ops: 0,
        }
    }

    fn add(&mut self, result: &LoadResult, cpu: Option<Duration>) {
        match &mut self.result {
            Some(total) => total.merge(result),
            None => self.result = Some(result.clone()),
        }
        if let Some(cpu) = cpu {
            self.cpu += cpu;
            self.cpu_ops += result.total_ops;
        }
    }

    fn cpu_us(&self) -> Option<f64> {
        (self.cpu_ops > 0).then(|| self.cpu.as_secs_f64() * 1e6 / self.cpu_ops as f64)
    }

    fn summary(&self) -> crate::stats::Summary {
        self.result
            .as_ref()
            .map(LoadResult::summary)
            .unwrap_or_default()
    }

    fn first_error(&self) -> Option<String> {
        self.result.as_ref().and_then(|r| r.first_error.clone())
    }
}

impl Bench {
    fn workload(
        &self,
        endpoints: Vec<Endpoint>,
        era: Era,
        operation: Operation,
        concurrency: usize,
    ) -> Workload {
        Workload {
            endpoints,
            era,
            operation,
            concurrency,
            pace: Pace::Closed,
            warmup: self.plan.warmup,
            duration: self.plan.duration,
        }
    }

    /// Runs `workload`; with a watched process, also its CPU time (and the gateway's RSS).
    async fn measure(
        &self,
        workload: &Workload,
        watched: Watched,
    ) -> (LoadResult, Option<Duration>) {
        let pid = match watched {
            Watched::Nothing => return (load::run(workload).await, None),
            Watched::Gateway(pid) | Watched::Proxy(pid) => pid,
        };
        let sampler = matches!(watched, Watched::Gateway(_)).then(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let max = Arc::clone(&self.load_max_rss);
            let task = tokio::spawn({
                let stop = Arc::clone(&stop);
                async move {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(rss) = proc_stats::rss_bytes(pid) {
                            max.fetch_max(rss, Ordering::Relaxed);
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            });
            (stop, task)
        });
        let before = proc_stats::cpu_time(pid);
        let result = load::run(workload).await;
        let after = proc_stats::cpu_time(pid);
        if let Some((stop, task)) = sampler {
            stop.store(true, Ordering::Relaxed);
            let _ = task.await;
        }
        let cpu = before.zip(after).map(|(b, a)| a.saturating_sub(b));
        (result, cpu)
    }

    /// Rounds of `direct`, `through` the gateway and, when given, `proxied` through HAProxy.
    /// The order rotates every round (A B C, B C A, C A B; with two sides A B, B A), so each
    /// side takes each position in turn and drift or warm caches favour none. With `profile`
    /// and `strace`, one extra traced run per process counts its system calls.
    async fn compare(
        &self,
        scenario: &str,
        direct: Workload,
        through: Workload,
        gateway: &GatewayProcess,
        proxied: Option<(Workload, &HaproxyProcess)>,
        profile: bool,
    ) -> Comparison {
        let mut plans = vec![
            (&direct, Watched::Nothing),
            (&through, Watched::Gateway(gateway.pid())),
        ];
        if let Some((workload, proxy)) = &proxied {
            plans.push((workload, Watched::Proxy(proxy.pid())));
        }
        let mut sides: Vec<Side> = plans.iter().map(|_| Side::new()).collect();
        for round in 0..self.plan.rounds.max(1) {
            for offset in 0..plans.len() {
                let index = (round + offset) % plans.len();
                let (workload, watched) = plans[index];
                let (result, cpu) = self.measure(workload, watched).await;
                sides[index].add(&result, cpu);
            }
        }
        let (mut gateway_syscalls, mut haproxy_syscalls) = (None, None);
        if let Some(strace) = self.strace.as_deref().filter(|_| profile) {
            gateway_syscalls = self.syscalls_per_op(strace, &through, gateway.pid()).await;
            if let Some((workload, proxy)) = &proxied {
                haproxy_syscalls = self.syscalls_per_op(strace, workload, proxy.pid()).await;
            }
        }
        let [a, b] = [&sides[0], &sides[1]];
        let c = sides.get(2);
        Comparison {
            scenario: scenario.to_owned(),
            concurrency: direct.concurrency,
            rate: None,
            direct: a.summary(),
            gateway: b.summary(),
            gateway_cpu_us: b.cpu_us(),
            haproxy: c.map(Side::summary),
            haproxy_cpu_us: c.and_then(Side::cpu_us),
            gateway_syscalls,
            haproxy_syscalls,
            first_error: b
                .first_error()
                .or_else(|| c.and_then(Side::first_error))
                .or_else(|| a.first_error()),
        }
    }

    /// `--profile`: one extra run of `workload` with `strace` attached to `pid`, its throughput
    /// thrown away (tracing slows the process); system calls per iteration, warm-up included
    /// as in the CPU figures. A failure becomes a note, not a failed benchmark.
    async fn syscalls_per_op(&self, strace: &Path, workload: &Workload, pid: u32) -> Option<f64> {
        let traced = async {
            let tracer = Strace::attach(strace, pid).map_err(|e| e.to_string())?;
            let result = load::run(workload).await;
            let counted = tracer.finish().map_err(|e| e.to_string())?;
            Ok::<_, String>(counted.calls as f64 / result.total_ops.max(1) as f64)
        };
        match traced.await {
            Ok(per_op) => Some(per_op),
            Err(e) => {
                self.notes
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!("--profile: no syscall count for pid {pid}: {e}"));
                None
            }
        }
    }

    /// RSS idle, then with the first count of `plan.sessions` open legacy sessions (how long
    /// 8 clients take to open them, the RSS with them open and after deleting them). The larger
    /// counts are [`session_scale`](Self::session_scale)'s, on a gateway of their own.
    async fn memory(&self, gateway: &GatewayProcess) -> Result<Memory, String> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let idle_rss = gateway.rss_bytes().unwrap_or(0);
        let mut scale = Vec::with_capacity(self.plan.sessions.len());
        if let Some(&count) = self.plan.sessions.first() {
            scale.push(open_idle_sessions(gateway, count, idle_rss).await?);
        }
        let first = scale.first().cloned().unwrap_or_default();
        Ok(Memory {
            idle_rss,
            sessions: first.sessions,
            sessions_rss: first.rss,
            bytes_per_session: first.bytes_per_session,
            after_delete_rss: first.after_delete_rss,
            scale,
            ..Memory::default()
        })
    }

    /// Modern `tools/call` (16 clients) against gateways with 0, 1 and 5 plugins, rotating the
    /// order every round.
    async fn plugins(&self, gateways: &[(usize, &GatewayProcess)]) -> Vec<PluginRun> {
        let mut sides: Vec<Side> = gateways.iter().map(|_| Side::new()).collect();
        for round in 0..self.plan.rounds.max(1) {
            for offset in 0..gateways.len() {
                let index = (round + offset) % gateways.len();
                let (_, gw) = gateways[index];
                let call = self.workload(
                    vec![through(gw, "modern", "echo-echo")],
                    Era::Modern,
                    Operation::CallTool,
                    16,
                );
                let (result, cpu) = self.measure(&call, Watched::Gateway(gw.pid())).await;
                sides[index].add(&result, cpu);
            }
        }
        gateways
            .iter()
            .zip(sides)
            .map(|((plugins, _), side)| PluginRun {
                plugins: *plugins,
                call: side.summary(),
                call_cpu_us: side.cpu_us(),
                first_error: side.first_error(),
            })
            .collect()
    }

    /// Session cycles and legacy calls against each gateway, rotating the order every round.
    async fn stores(&self, gateways: &[(String, &GatewayProcess)]) -> Vec<StoreRun> {
        let mut sides: Vec<(Side, Side)> = gateways
            .iter()
            .map(|_| (Side::new(), Side::new()))
            .collect();
        for round in 0..self.plan.rounds.max(1) {
            for offset in 0..gateways.len() {
                let index = (round + offset) % gateways.len();
                let (_, gw) = gateways[index];
                let endpoint = through(gw, "legacy", "echo-echo");
                let setup = self.workload(
                    vec![endpoint.clone()],
                    Era::Legacy,
                    Operation::SessionCycle,
                    8,
                );
                let (result, cpu) = self.measure(&setup, Watched::Gateway(gw.pid())).await;
                sides[index].0.add(&result, cpu);
                let call = self.workload(vec![endpoint], Era::Legacy, Operation::CallTool, 16);
                let (result, cpu) = self.measure(&call, Watched::Gateway(gw.pid())).await;
                sides[index].1.add(&result, cpu);
            }
        }
        gateways
            .iter()
            .zip(sides)
            .map(|((kind, _), (setup, call))| StoreRun {
                kind: kind.clone(),
                setup: setup.summary(),
                setup_cpu_us: setup.cpu_us(),
                call: call.summary(),
                call_cpu_us: call.cpu_us(),
                first_error: setup.first_error().or_else(|| call.first_error()),
            })
            .collect()
    }
}

/// A plugin document with the first `count` of five plugins that all govern the benchmark's
/// `tools/call` (allow-list, size limit, secret scan, rate limit far above the load, headers).
fn plugin_document(count: usize) -> String {
    const PLUGINS: [&str; 5] = [
        "name = \"allow\"\nkind = \"tool_filter\"\nconfig = { allow = [\"*\"] }",
        "name = \"sizes\"\nkind = \"size_limit\"\nconfig = { max_argument_bytes = 65536 }",
        "name = \"secrets\"\nkind = \"secret_filter\"\nhooks = [\"tool_pre_invoke\"]",
        "name = \"rate\"\nkind = \"rate_limit\"\nconfig = { limit = 100000000, window_s = 1, per = \"principal\" }",
        "name = \"headers\"\nkind = \"upstream_headers\"\nconfig = { headers = { x-bench-caller = \"{subject}\" } }",
    ];
    let mut doc = String::from("version = 1\n");
    for plugin in PLUGINS.iter().take(count) {
        doc.push_str("\n[[plugins]]\n");
        doc.push_str(plugin);
        doc.push('\n');
    }
    doc
}

/// One request per virtual host, so the gateway has probed every backend's era before anything
/// is measured.
async fn warm_up(
    gateway: &GatewayProcess,
    targets: &[CallTarget],
    fanouts: &[usize],
) -> Result<(), String> {
    for target in targets {
        let vhost = target.vhost;
        let mut client = McpClient::new(through(gateway, vhost, "echo-echo"), target.era);
        client
            .call_tool()
            .await
            .map_err(|e| format!("gateway warm-up ({vhost}): {e}"))?;
        if target.era == Era::Legacy {
            client
                .delete_session()
                .await
                .map_err(|e| format!("gateway warm-up ({vhost} DELETE): {e}"))?;
        }
    }
    for n in fanouts {
        let mut client = McpClient::new(through(gateway, &format!("fan{n}"), ""), Era::Modern);
        client
            .list_tools()
            .await
            .map_err(|e| format!("gateway warm-up (fan{n}): {e}"))?;
    }
    Ok(())
}

/// Opens `count` legacy sessions from 8 clients at once and leaves them idle: the time that
/// took, the RSS with them open (against `idle_rss`), and after deleting them.
async fn open_idle_sessions(
    gateway: &GatewayProcess,
    count: usize,
    idle_rss: u64,
) -> Result<SessionScale, String> {
    let clients = 8;
    let per_client = count.div_ceil(clients);
    let endpoint = through(gateway, "legacy", "echo-echo");
    let started = std::time::Instant::now();
    let opened = join_all((0..clients).map(|_| {
        let endpoint = endpoint.clone();
        async move {
            let mut client = McpClient::new(endpoint, Era::Legacy);
            let mut sessions = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                client.initialize().await.map_err(|e| e.to_string())?;
                sessions.extend(client.take_session());
            }
            Ok::<_, String>((client, sessions))
        }
    }))
    .await;
    let open_seconds = started.elapsed().as_secs_f64();
    let mut open = Vec::with_capacity(clients);
    for outcome in opened {
        open.push(outcome?);
    }
    let sessions: usize = open.iter().map(|(_, s)| s.len()).sum();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss = gateway.rss_bytes().unwrap_or(0);
    let deleted = join_all(open.into_iter().map(|(mut client, sessions)| async move {
        for session in sessions {
            client.delete(&session).await.map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    }))
    .await;
    deleted.into_iter().collect::<Result<Vec<()>, String>>()?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(SessionScale {
        sessions,
        rss,
        bytes_per_session: rss.saturating_sub(idle_rss) as f64 / sessions.max(1) as f64,
        open_seconds,
        after_delete_rss: gateway.rss_bytes().unwrap_or(0),
    })
}

fn direct(backend: &EchoBackend) -> Endpoint {
    Endpoint::new(backend.addr(), "/mcp")
}

pub(crate) fn through(gateway: &GatewayProcess, vhost: &str, tool: &str) -> Endpoint {
    Endpoint::new(gateway.addr(), format!("/servers/{vhost}/mcp"))
        .bearer(gateway.token())
        .tool(tool)
}

/// The file store document: each target's virtual host (one backend named `echo`) and
/// `fan<n>` (backends `b0`..).
pub(crate) fn users_json(targets: &[CallTarget], fan: &[EchoBackend], fanouts: &[usize]) -> String {
    let backend = |url: String| json!({ "url": url, "timeout_ms": 30000 });
    let mut vhosts = serde_json::Map::new();
    for target in targets {
        vhosts.insert(
            target.vhost.into(),
            json!({
                "naming": "prefix",
                "backends": { "echo": backend(format!("http://{}/mcp", target.addr)) }
            }),
        );
    }
    for &n in fanouts {
        let backends: serde_json::Map<String, serde_json::Value> = fan
            .iter()
            .take(n)
            .enumerate()
            .map(|(i, b)| (format!("b{i}"), backend(b.url())))
            .collect();
        vhosts.insert(
            format!("fan{n}"),
            json!({ "naming": "prefix", "backends": backends }),
        );
    }
    json!({ "users": { crate::gateway::SUBJECT: { "virtual_hosts": vhosts } } }).to_string()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, so no date crate for one timestamp).
pub(crate) fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

fn format_utc(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_timestamps_are_civil_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_795_995_045), "2026-11-29T23:30:45Z");
    }
}
