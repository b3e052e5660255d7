//! The stdio processes (feature `stdio`): started, multiplexed over a [`Link`], reaped and
//! restarted (see the [parent module](super) for the rules).

use std::process::Stdio;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use mcp_core::Budget;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::upstream::link::{Carrier, Link, LinkBuffers, LinkKey, Outbound, Pool};
use crate::upstream::{Call, LinkEvents, Target, UpstreamError, UpstreamReply};

use super::catalog::{Launch, StdioRules, resolve_program};

/// Idle lifetime of a per-principal process without an idle timeout of its own.
const DEFAULT_IDLE: Duration = Duration::from_secs(300);
/// Longest line read from a process (a larger message is a protocol failure).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Which process serves a call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ProcessKey {
    backend: String,
    launch: Launch,
    /// The caller, unless the process is shared.
    principal: Option<mcp_core::Principal>,
}

impl LinkKey for ProcessKey {
    /// Only per-principal processes end when idle; a shared one lives as long as it works.
    fn reapable(&self) -> bool {
        self.principal.is_some()
    }

    /// Per-principal processes count against their principal's share of the pool.
    fn principal(&self) -> Option<&mcp_core::Principal> {
        self.principal.as_ref()
    }
}

/// Most per-principal processes one principal runs at once, so one tenant (many backends, or
/// many values of a `user_env` key) cannot take every process slot.
pub(crate) const MAX_PROCESSES_PER_PRINCIPAL: usize = 8;

/// The stdio processes of one router.
pub(crate) struct StdioPool {
    pool: Pool<ProcessKey, Process>,
    /// The operator's rules, which a reload replaces: a backend's launch comes from the rules
    /// in force when its call arrives, and a process is keyed by its launch, so a changed
    /// catalog entry starts a new process for the next calls while the old one finishes its own.
    rules: ArcSwap<StdioRules>,
    client_info: Box<RawValue>,
    /// What the processes' calls hold for their clients is drawn from here.
    buffers: LinkBuffers,
}

impl StdioPool {
    /// The budget of each principal's processes, for metrics.
    pub(crate) fn budget(&self) -> Option<&Budget> {
        Some(self.pool.budget())
    }

    pub(crate) fn new(
        rules: StdioRules,
        max_processes: usize,
        client_info: Box<RawValue>,
        buffers: LinkBuffers,
    ) -> Self {
        Self {
            pool: Pool::new(
                "stdio_links",
                max_processes,
                MAX_PROCESSES_PER_PRINCIPAL,
                UpstreamError::ProcessFailed,
                UpstreamError::ProcessFailed,
            ),
            rules: ArcSwap::from_pointee(rules),
            client_info,
            buffers,
        }
    }

    /// Launches the next processes under `rules` (see the field `rules`).
    pub(crate) fn replace_rules(&self, rules: StdioRules) {
        self.rules.store(Arc::new(rules));
    }

    /// Sends `call` to the backend's process, starting it when needed.
    pub(crate) async fn send(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let process = self.process(target).await?;
        process.link.send(target, call, &self.client_info, None)
    }

    /// What the backend says about itself: its `DiscoverResult` or `InitializeResult`.
    pub(crate) async fn describe(&self, target: &Target<'_>) -> Result<Bytes, UpstreamError> {
        Ok(self.process(target).await?.link.description())
    }

    /// The process's notifications of no call (see [`Link::events`]), its era, and whether it is
    /// shared by every principal; starts the process when needed.
    pub(crate) async fn listen(&self, target: &Target<'_>) -> Result<LinkEvents, UpstreamError> {
        let process = self.process(target).await?;
        Ok(LinkEvents {
            era: process.link.era(),
            shared: !process.link.exclusive(),
            events: process.link.events(),
        })
    }

    /// The live process for `target`, started (or restarted, after its backoff) when needed.
    async fn process(&self, target: &Target<'_>) -> Result<Arc<Process>, UpstreamError> {
        let launch = self
            .rules
            .load()
            .launch(target.config)
            .map_err(|refusals| {
                for refusal in &refusals {
                    tracing::warn!(
                        backend = target.name,
                        field = %refusal.field,
                        reason = %refusal.message,
                        "stdio backend not allowed by the operator's rules"
                    );
                }
                UpstreamError::NotAllowed
            })?;
        let principal = (!launch.shared).then(|| target.principal.clone());
        let key = ProcessKey {
            backend: target.name.to_owned(),
            launch,
            principal,
        };
        self.pool
            .get(&key, || {
                Process::start(&key, target, &self.client_info, self.buffers.clone())
            })
            .await
    }
}

/// One running backend process.
struct Process {
    link: Arc<Link>,
    /// Kills the child when the process is dropped (reaped by its waiter task).
    _kill: tokio::sync::oneshot::Sender<()>,
}

impl Carrier for Process {
    fn link(&self) -> &Link {
        &self.link
    }
}

impl Process {
    async fn start(
        key: &ProcessKey,
        target: &Target<'_>,
        client_info: &RawValue,
        buffers: LinkBuffers,
    ) -> Result<Arc<Self>, UpstreamError> {
        let launch = &key.launch;
        let Some(program) = resolve_program(&launch.command) else {
            tracing::warn!(backend = %key.backend, command = %launch.command, "stdio backend program not found on the gateway's PATH");
            return Err(UpstreamError::ProcessFailed);
        };
        let mut command = tokio::process::Command::new(&program);
        command
            .args(&launch.args)
            .env_clear()
            .envs(std::env::var_os("PATH").map(|path| ("PATH", path)))
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &launch.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|e| {
            tracing::warn!(backend = %key.backend, program = %program.display(), error = %e, "cannot start a stdio backend");
            UpstreamError::ProcessFailed
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(UpstreamError::ProcessFailed);
        };
        let (kill, killed) = tokio::sync::oneshot::channel();
        let idle_timeout = launch.idle_timeout.unwrap_or(DEFAULT_IDLE);
        let (link, outbound) =
            Link::new(&key.backend, idle_timeout, key.principal.is_some(), buffers);
        tokio::spawn(write_stdin(stdin, outbound));
        tokio::spawn(read_stderr(key.backend.clone(), stderr));
        tokio::spawn(read_stdout(Arc::downgrade(&link), stdout));
        tokio::spawn(wait_child(key.backend.clone(), child, killed));
        // The spec recommends probing the era once per process for stdio.
        link.handshake(target, client_info, true).await?;
        tracing::info!(backend = %key.backend, "stdio backend started");
        Ok(Arc::new(Self { link, _kill: kill }))
    }
}

async fn write_stdin(
    mut stdin: tokio::process::ChildStdin,
    mut outbound: mpsc::Receiver<Outbound>,
) {
    while let Some(mut message) = outbound.recv().await {
        message.body.push(b'\n');
        if stdin.write_all(&message.body).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

async fn read_stdout(link: Weak<Link>, stdout: tokio::process::ChildStdout) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        let Some(link) = link.upgrade() else {
            return;
        };
        match read {
            Ok(0) | Err(_) => {
                link.died();
                return;
            }
            Ok(_) if line.last() != Some(&b'\n') && line.len() >= MAX_LINE => {
                tracing::warn!(backend = %link.backend(), "stdio backend sent a message over 16 MiB");
                link.died();
                return;
            }
            Ok(_) => link.dispatch(line.trim_ascii_end()),
        }
    }
}

async fn read_stderr(backend: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(backend = %backend, stderr = %line, "stdio backend");
    }
}

/// Waits for the child (so it never lingers as a zombie), killing it when its process is dropped.
async fn wait_child(
    backend: String,
    mut child: tokio::process::Child,
    killed: tokio::sync::oneshot::Receiver<()>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        _ = killed => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    match status {
        Ok(status) => tracing::info!(backend = %backend, %status, "stdio backend exited"),
        Err(e) => tracing::warn!(backend = %backend, error = %e, "cannot wait for a stdio backend"),
    }
}
