//! [`RedisSentinelSet`] (a primary, a replica and three sentinels) and [`RedisClusterSet`] (three
//! masters made with `redis-cli --cluster create`): private `redis-server` processes on free
//! loopback ports that tests kill and restart to exercise failovers.
//!
//! Both need `redis-server` (found like [`RedisServer`](crate::RedisServer) finds it) and
//! `redis-cli` next to it or on `PATH`; without them `start` returns `None` after a loud message
//! (a panic under `CI=true`). An external `REDIS_URL` is never used: these tests need processes
//! they own. Waits poll the servers' own answers (`SENTINEL get-master-addr-by-name`,
//! `CLUSTER INFO`) with deadlines of many seconds, never fixed sleeps.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::TempDir;
use crate::redis_server::{find_binary, free_port, ping, report_missing_binary, skipped};

/// The master name the sentinels monitor.
pub const SENTINEL_MASTER: &str = "mymaster";

/// Deadline of a promotion or a cluster becoming ok (Sentinel needs `down-after` + an election).
const TOPOLOGY_TIMEOUT: Duration = Duration::from_secs(60);
/// Deadline of one process answering `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// One `redis-server` child on a fixed port with a fixed command line.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl Node {
    pub(crate) async fn start(bin: &Path, port: u16, args: Vec<String>) -> Result<Self, String> {
        let mut node = Self {
            port,
            args,
            child: None,
        };
        node.spawn(bin).await?;
        Ok(node)
    }

    async fn spawn(&mut self, bin: &Path) -> Result<(), String> {
        let mut child = Command::new(bin)
            .args(&self.args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "redis-server on port {} exited with {status}",
                    self.port
                ));
            }
            if ping(self.port).await {
                self.child = Some(child);
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                let _ = child.kill().await;
                return Err(format!("port {} did not answer PING", self.port));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }
}

/// `redis-server` and `redis-cli`, or `None` after the usual skip message.
pub(crate) fn binaries() -> Option<(PathBuf, PathBuf)> {
    let Some(server) = find_binary() else {
        report_missing_binary();
        return None;
    };
    let beside = server.with_file_name("redis-cli");
    let cli = if beside.is_file() {
        Some(beside)
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("redis-cli"))
                .find(|c| c.is_file())
        })
    };
    match cli {
        Some(cli) => Some((server, cli)),
        None => {
            let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
            assert!(
                !ci,
                "redis-cli not found; CI=true requires the Redis topology tests to run"
            );
            skipped("redis-cli not found next to redis-server or on PATH");
            None
        }
    }
}

/// Runs `redis-cli -p port args...` and returns its stdout (`None` when it fails).
pub(crate) async fn cli(cli: &Path, port: u16, args: &[&str]) -> Option<String> {
    let run = Command::new(cli)
        .arg("-h")
        .arg("127.0.0.1")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .ok()?
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn base_args(port: u16, dir: &Path) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--notify-keyspace-events",
        "K$gx",
        "--daemonize",
        "no",
        "--dir",
        &dir.display().to_string(),
        "--logfile",
        &dir.join(format!("redis-{port}.log")).display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

pub(crate) async fn free_ports(n: usize) -> Vec<u16> {
    let mut ports = Vec::with_capacity(n);
    while ports.len() < n {
        if let Ok(port) = free_port().await
            && !ports.contains(&port)
        {
            ports.push(port);
        }
    }
    ports
}

/// A primary, one replica and three sentinels (quorum 2) monitoring [`SENTINEL_MASTER`], as
/// private `redis-server` processes (`redis-server` and `redis-cli` needed: without them `start`
/// returns `None`, or panics under `CI=true`). Dropping it kills every process.
#[derive(Debug)]
pub struct RedisSentinelSet {
    server: PathBuf,
    cli: PathBuf,
    _dir: TempDir,
    /// Data nodes: index 0 starts as primary, 1 as its replica.
    data: Vec<Node>,
    sentinels: Vec<Node>,
}

impl RedisSentinelSet {
    /// Starts the five processes and waits until every sentinel knows the primary and the
    /// replica is in sync. `None` when the binaries are missing.
    ///
    /// # Panics
    ///
    /// When the processes cannot be started or do not converge within a minute.
    pub async fn start() -> Option<Self> {
        let (server, cli_bin) = binaries()?;
        let dir = TempDir::new("sentinel").expect("temp dir");
        let ports = free_ports(5).await;
        let (primary, replica) = (ports[0], ports[1]);
        let mut data = Vec::new();
        data.push(
            Node::start(&server, primary, base_args(primary, dir.path()))
                .await
                .expect("primary"),
        );
        let mut args = base_args(replica, dir.path());
        args.extend([
            "--replicaof".into(),
            "127.0.0.1".into(),
            primary.to_string(),
        ]);
        data.push(Node::start(&server, replica, args).await.expect("replica"));
        let mut sentinels = Vec::new();
        for &port in &ports[2..] {
            let conf = dir.path().join(format!("sentinel-{port}.conf"));
            let text = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel-{port}.log\n\
                 sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {primary} 2\n\
                 sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                 sentinel failover-timeout {SENTINEL_MASTER} 10000\n\
                 sentinel parallel-syncs {SENTINEL_MASTER} 1\n",
                dir = dir.path().display()
            );
            std::fs::write(&conf, text).expect("sentinel.conf");
            let args = vec![conf.display().to_string(), "--sentinel".to_owned()];
            sentinels.push(Node::start(&server, port, args).await.expect("sentinel"));
        }
        let set = Self {
            server,
            cli: cli_bin,
            _dir: dir,
            data,
            sentinels,
        };
        set.wait_for("the sentinels to see the replica", || async {
            for s in &set.sentinels {
                let out = cli(&set.cli, s.port, &["SENTINEL", "replicas", SENTINEL_MASTER]).await?;
                if !out.contains(&replica.to_string()) {
                    return None;
                }
                let ok = cli(
                    &set.cli,
                    s.port,
                    &["SENTINEL", "sentinels", SENTINEL_MASTER],
                )
                .await?;
                // Each sentinel must know the two others before a failover can be agreed on.
                if ok.matches("127.0.0.1").count() < 2 {
                    return None;
                }
            }
            let info = cli(&set.cli, replica, &["INFO", "replication"]).await?;
            info.contains("master_link_status:up").then_some(())
        })
        .await;
        Some(set)
    }

    /// `redis+sentinel://127.0.0.1:a,127.0.0.1:b,127.0.0.1:c/mymaster`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{SENTINEL_MASTER}", hosts.join(","))
    }

    /// `redis://127.0.0.1:<port>/` of the data node the sentinels currently call primary.
    pub async fn primary_url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.primary_port().await)
    }

    /// The port the first answering sentinel reports for the primary.
    ///
    /// # Panics
    ///
    /// When no sentinel answers.
    pub async fn primary_port(&self) -> u16 {
        for s in &self.sentinels {
            if let Some(out) = cli(
                &self.cli,
                s.port,
                &["SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER],
            )
            .await
                && let Some(port) = out.lines().nth(1).and_then(|p| p.trim().parse().ok())
            {
                return port;
            }
        }
        panic!("no sentinel reports a primary");
    }

    /// Kills the current primary (SIGKILL) and returns its port.
    pub async fn kill_primary(&mut self) -> u16 {
        let port = self.primary_port().await;
        if let Some(node) = self.data.iter_mut().find(|n| n.port == port) {
            node.kill().await;
        }
        port
    }

    /// Waits until the sentinels report a primary other than `old` and that node says it is
    /// a master; returns its port.
    ///
    /// # Panics
    ///
    /// When no promotion happens within a minute.
    pub async fn wait_for_promotion(&self, old: u16) -> u16 {
        self.wait_for("a replica to be promoted", || async {
            let mut reported = None;
            for s in &self.sentinels {
                let out = cli(
                    &self.cli,
                    s.port,
                    &["SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER],
                )
                .await?;
                let port: u16 = out.lines().nth(1)?.trim().parse().ok()?;
                if port == old || reported.is_some_and(|p| p != port) {
                    return None;
                }
                reported = Some(port);
            }
            let port = reported?;
            let info = cli(&self.cli, port, &["INFO", "replication"]).await?;
            info.contains("role:master").then_some(port)
        })
        .await
    }

    /// Kills every data node (SIGKILL), so that no replica is left to promote, and waits until
    /// every sentinel flags the primary down (`s_down`): from then on the sentinels know no usable
    /// primary, which clients report as "master not found", until a data node comes back.
    ///
    /// # Panics
    ///
    /// When the sentinels do not flag it within a minute.
    pub async fn kill_every_data_node(&mut self) {
        for node in &mut self.data {
            node.kill().await;
        }
        self.wait_for("every sentinel to flag the primary down", || async {
            for s in &self.sentinels {
                let out = cli(&self.cli, s.port, &["SENTINEL", "master", SENTINEL_MASTER]).await?;
                let flags = out.lines().skip_while(|l| l.trim() != "flags").nth(1)?;
                if !flags.contains("s_down") {
                    return None;
                }
            }
            Some(())
        })
        .await;
    }

    /// Starts a killed data node again on its port (Sentinel turns it into a replica).
    ///
    /// # Panics
    ///
    /// When it does not start.
    pub async fn restart_node(&mut self, port: u16) {
        let server = self.server.clone();
        let node = self
            .data
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a data node on this port");
        node.kill().await;
        node.spawn(&server).await.expect("restart");
    }

    /// Runs `redis-cli` against `port`.
    pub async fn cli(&self, port: u16, args: &[&str]) -> Option<String> {
        cli(&self.cli, port, args).await
    }

    async fn wait_for<T, F, Fut>(&self, what: &str, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + TOPOLOGY_TIMEOUT;
        loop {
            if let Some(value) = probe().await {
                return value;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {TOPOLOGY_TIMEOUT:?} waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Three cluster masters (no replicas) sharing the 16384 slots, made with
/// `redis-cli --cluster create` (both programs needed, as for [`RedisSentinelSet`]). Nodes keep an append-only file, so
/// a killed and restarted node comes back with its slots and its data.
#[derive(Debug)]
pub struct RedisClusterSet {
    server: PathBuf,
    cli: PathBuf,
    _dir: TempDir,
    nodes: Vec<Node>,
}

impl RedisClusterSet {
    /// Starts three nodes, creates the cluster and waits until every node says
    /// `cluster_state:ok`. `None` when the binaries are missing.
    ///
    /// # Panics
    ///
    /// When the nodes cannot be started or the cluster does not form within a minute.
    pub async fn start() -> Option<Self> {
        let (server, cli_bin) = binaries()?;
        let dir = TempDir::new("cluster").expect("temp dir");
        let mut nodes = Vec::new();
        for port in free_ports(3).await {
            let mut args = base_args(port, dir.path());
            // Persistence on (each node its own file), so a restart keeps slots and data.
            let aof = args.iter().position(|a| a == "--appendonly").expect("flag") + 1;
            args[aof] = "yes".to_owned();
            args.extend([
                "--appendfilename".to_owned(),
                format!("appendonly-{port}.aof"),
                "--appenddirname".to_owned(),
                format!("aof-{port}"),
                "--cluster-enabled".to_owned(),
                "yes".to_owned(),
                "--cluster-config-file".to_owned(),
                dir.path()
                    .join(format!("nodes-{port}.conf"))
                    .display()
                    .to_string(),
                "--cluster-node-timeout".to_owned(),
                "2000".to_owned(),
            ]);
            nodes.push(
                Node::start(&server, port, args)
                    .await
                    .expect("cluster node"),
            );
        }
        let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
        create.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.extend(["--cluster-replicas", "0", "--cluster-yes"].map(str::to_owned));
        let args: Vec<&str> = create.iter().map(String::as_str).collect();
        // `--cluster create` talks to every node itself; the -p of the first is only a default.
        cli(&cli_bin, nodes[0].port, &args)
            .await
            .expect("redis-cli --cluster create");
        let set = Self {
            server,
            cli: cli_bin,
            _dir: dir,
            nodes,
        };
        set.wait_until_ok().await;
        Some(set)
    }

    /// `redis+cluster://127.0.0.1:a,127.0.0.1:b,127.0.0.1:c`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The nodes' ports.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The port of the node serving `key`'s slot (`CLUSTER KEYSLOT` + `CLUSTER SLOTS`).
    ///
    /// # Panics
    ///
    /// When the cluster does not answer.
    pub async fn node_of(&self, key: &str) -> u16 {
        for node in &self.nodes {
            let Some(slot) = cli(&self.cli, node.port, &["CLUSTER", "KEYSLOT", key]).await else {
                continue;
            };
            let Ok(slot) = slot.trim().parse::<u16>() else {
                continue;
            };
            let Some(slots) = cli(&self.cli, node.port, &["CLUSTER", "SLOTS"]).await else {
                continue;
            };
            // Plain output: start, end, then ip and port of the master (and its id), per range.
            let lines: Vec<&str> = slots.lines().map(str::trim).collect();
            let mut i = 0;
            while i + 3 < lines.len() {
                if let (Ok(start), Ok(end), Ok(port)) = (
                    lines[i].parse::<u16>(),
                    lines[i + 1].parse::<u16>(),
                    lines[i + 3].parse::<u16>(),
                ) && (start..=end).contains(&slot)
                {
                    return port;
                }
                i += 1;
            }
        }
        panic!("no node reports the slot of {key}");
    }

    /// Kills the node on `port`.
    pub async fn kill(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port == port) {
            node.kill().await;
        }
    }

    /// Restarts the node on `port` and waits until the cluster is ok again.
    ///
    /// # Panics
    ///
    /// When it does not start or the cluster does not recover within a minute.
    pub async fn restart(&mut self, port: u16) {
        let server = self.server.clone();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node on this port");
        node.kill().await;
        node.spawn(&server).await.expect("restart");
        self.wait_until_ok().await;
    }

    /// Runs `redis-cli -c` (following redirects) against `port`.
    pub async fn cli(&self, port: u16, args: &[&str]) -> Option<String> {
        let mut all = vec!["-c"];
        all.extend_from_slice(args);
        cli(&self.cli, port, &all).await
    }

    async fn wait_until_ok(&self) {
        let deadline = tokio::time::Instant::now() + TOPOLOGY_TIMEOUT;
        loop {
            let mut ok = true;
            for node in &self.nodes {
                let info = cli(&self.cli, node.port, &["CLUSTER", "INFO"]).await;
                ok &= info.is_some_and(|i| i.contains("cluster_state:ok"));
            }
            if ok {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the cluster did not reach cluster_state:ok within {TOPOLOGY_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
