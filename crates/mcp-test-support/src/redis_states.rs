//! Redis servers held in the states a failover or a restart passes through, for tests of what
//! the gateway answers meanwhile: [`RedisLoading`] (a server still loading its data set, which
//! answers `-LOADING`) and [`RedisReplica`] (a read-only replica of a primary, which answers
//! writes with `-READONLY`). Private `redis-server` processes on free loopback ports, found and
//! reported like those of [`RedisSentinelSet`](crate::RedisSentinelSet); `start` returns `None`
//! (a panic under `CI=true`) without the binaries.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::TempDir;
use crate::redis_server::answers_ping_with;
use crate::redis_topologies::{Node, base_args, binaries, cli, free_ports};

/// Keys in the data set a [`RedisLoading`] server loads, their size, and the delay per key: about
/// two minutes of loading (a test's margin on a loaded machine), with the server answering
/// between two keys (each key is more than `loading-process-events-interval-bytes`).
const LOADING_KEYS: usize = 2400;
const LOADING_VALUE_BYTES: usize = 2048;
const LOADING_DELAY_MICROS: u32 = 50_000;
/// Deadline of a server reaching the state a helper waits for.
const STATE_TIMEOUT: Duration = Duration::from_secs(30);

/// A `redis-server` that is loading its data set (for about two minutes from its start) and answers
/// every command with `-LOADING`, as a restarted server does until its data is back. Killed when
/// dropped.
#[derive(Debug)]
pub struct RedisLoading {
    _dir: TempDir,
    child: Child,
    port: u16,
}

impl RedisLoading {
    /// Writes a data set with a first server, then starts a second one on it with Redis' own
    /// `key-load-delay` (the setting its test suite slows loading with), and waits until it
    /// answers `-LOADING`.
    ///
    /// # Panics
    ///
    /// When a server cannot be started or does not reach the loading state within 30 s.
    pub async fn start() -> Option<Self> {
        let (server, _) = binaries()?;
        let dir = TempDir::new("redis-loading").expect("temp dir");
        let ports = free_ports(2).await;
        let mut writer = Node::start(&server, ports[0], base_args(ports[0], dir.path()))
            .await
            .expect("the server writing the data set");
        fill_and_save(ports[0]).await;
        writer.kill().await;

        let mut args = base_args(ports[1], dir.path());
        args.extend(
            [
                "--key-load-delay",
                &LOADING_DELAY_MICROS.to_string(),
                "--loading-process-events-interval-bytes",
                "1024",
            ]
            .map(str::to_owned),
        );
        let child = Command::new(&server)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn redis-server");
        let loading = Self {
            _dir: dir,
            child,
            port: ports[1],
        };
        let deadline = tokio::time::Instant::now() + STATE_TIMEOUT;
        while !loading.is_loading().await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-server on port {} never answered -LOADING",
                loading.port
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Some(loading)
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Whether the server answers `PING` with `-LOADING` right now.
    pub async fn is_loading(&self) -> bool {
        answers_ping_with(self.port, b"-LOADING", Duration::from_secs(2)).await
    }
}

impl Drop for RedisLoading {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Writes [`LOADING_KEYS`] keys of incompressible bytes (so each stays over the loading
/// interval on disk) and `SAVE`s them to the server's `dump.rdb`.
async fn fill_and_save(port: u16) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the writer");
    // xorshift64: incompressible enough for LZF, and no dependency.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut commands = Vec::new();
    for key in 0..LOADING_KEYS {
        let mut value = Vec::with_capacity(LOADING_VALUE_BYTES);
        while value.len() < LOADING_VALUE_BYTES {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            value.extend_from_slice(&state.to_le_bytes());
        }
        let name = format!("filler:{key}");
        commands.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{name}\r\n${}\r\n",
                name.len(),
                value.len()
            )
            .as_bytes(),
        );
        commands.extend_from_slice(&value);
        commands.extend_from_slice(b"\r\n");
    }
    commands.extend_from_slice(b"*1\r\n$4\r\nSAVE\r\n");
    stream
        .write_all(&commands)
        .await
        .expect("write the data set");
    // LOADING_KEYS `+OK` replies, then SAVE's own `+OK`.
    let expected = (LOADING_KEYS + 1) * b"+OK\r\n".len();
    let mut replies = vec![0u8; expected];
    tokio::time::timeout(STATE_TIMEOUT, stream.read_exact(&mut replies))
        .await
        .expect("the writer answers within 30 s")
        .expect("read the replies");
    assert!(
        replies.chunks(5).all(|r| r == b"+OK\r\n"),
        "the data set was not written and saved"
    );
}

/// A primary and its read-only replica (`replica-read-only yes`, Redis' default), in sync.
/// Killed when dropped.
#[derive(Debug)]
pub struct RedisReplica {
    _primary: Node,
    replica: Node,
    /// Last: removed once both servers are killed.
    _dir: TempDir,
}

impl RedisReplica {
    /// Starts both and waits until the replica's link to the primary is up.
    ///
    /// # Panics
    ///
    /// When a server cannot be started or the link is not up within 30 s.
    pub async fn start() -> Option<Self> {
        let (server, cli_bin) = binaries()?;
        let dir = TempDir::new("redis-replica").expect("temp dir");
        let ports = free_ports(2).await;
        let primary = Node::start(&server, ports[0], base_args(ports[0], dir.path()))
            .await
            .expect("primary");
        let mut args = base_args(ports[1], dir.path());
        args.extend([
            "--replicaof".into(),
            "127.0.0.1".into(),
            ports[0].to_string(),
        ]);
        let replica = Node::start(&server, ports[1], args).await.expect("replica");
        let deadline = tokio::time::Instant::now() + STATE_TIMEOUT;
        loop {
            let info = cli(&cli_bin, ports[1], &["INFO", "replication"]).await;
            if info.is_some_and(|i| i.contains("master_link_status:up")) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the replica never linked to its primary"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(Self {
            _primary: primary,
            replica,
            _dir: dir,
        })
    }

    /// `redis://127.0.0.1:<port>/` of the replica (reads work, writes answer `-READONLY`).
    pub fn replica_url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.replica.port)
    }
}
