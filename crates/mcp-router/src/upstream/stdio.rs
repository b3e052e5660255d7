//! stdio backends: MCP servers the gateway runs as child processes (`command`, `args`, `env`,
//! `cwd` in the user configuration), speaking newline-delimited JSON-RPC on stdin/stdout.
//!
//! - **Who may be spawned**: only programs on the operator's allow-list
//!   ([`McpRouterBuilder::stdio_allowed_commands`](crate::McpRouterBuilder::stdio_allowed_commands));
//!   a user configuration alone never starts anything ([`UpstreamError::NotAllowed`]).
//! - **Environment**: explicit. The child gets `PATH` (so `npx`/`uvx` resolve) and the backend's
//!   `env` entries, nothing else of the gateway's environment (no inherited secrets).
//! - **One process, many callers**: requests get process-unique ids (`g<n>`) and progress tokens
//!   are already unique per call, so responses and `notifications/progress` go back to the caller
//!   that asked. Other notifications are logged and dropped; a server's own requests (sampling,
//!   roots…) are declined with `-32601`. A caller that goes away sends `notifications/cancelled`.
//!   stderr lines are logged with the backend's name.
//! - **Era**: probed once per process, as the spec recommends for stdio: `server/discover`
//!   (2026-07-28: every request then carries the per-request `_meta`), else `initialize` +
//!   `notifications/initialized` (2025). Callers never see an upstream session.
//! - **Policy** (`stdio_policy`): `shared` (default; one process for all principals) or
//!   `per_principal` (one per principal, ended after `idle_timeout_s` without calls, default
//!   300 s). At most `max_processes` run at once; beyond that a call fails at once.
//! - **Crashes**: a process that exits fails its calls in flight (`backend connection lost`),
//!   is reaped, and is started again by the next call after a backoff (100 ms doubling to 5 s) —
//!   until then calls fail at once. The backend's circuit breaker sees every failure.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_config_store::StdioPolicy;
use mcp_core::{Envelope, Era, MessageKind, RawObject, RequestId, encode_error, encode_request};
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::meta;
use super::{Call, MessageStream, Reply, Target, UpstreamError, final_result, legacy_capabilities};

/// Restart delays after a process died, doubling up to the last.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Idle lifetime of a `per_principal` process without `idle_timeout_s`.
const DEFAULT_IDLE: Duration = Duration::from_secs(300);
/// How often idle `per_principal` processes are looked for.
const REAP_EVERY: Duration = Duration::from_millis(500);
/// Longest line read from a process (a larger message is a protocol failure).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Which process serves a call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ProcessKey {
    backend: String,
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<std::path::PathBuf>,
    /// (issuer, subject) for `per_principal`.
    principal: Option<(String, String)>,
}

/// The running or restarting process of one key.
#[derive(Default)]
struct Slot {
    process: Option<Arc<Process>>,
    /// When the last start failed or the process died, and how many times in a row.
    failures: Option<(Instant, u32)>,
}

/// The stdio processes of one router.
pub(crate) struct StdioPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    slots: Mutex<HashMap<ProcessKey, Arc<tokio::sync::Mutex<Slot>>>>,
    allowed: Vec<String>,
    max_processes: usize,
    client_info: Box<RawValue>,
    reaper: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        let reaper = self.reaper.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(handle) = reaper.take() {
            handle.abort();
        }
    }
}

impl StdioPool {
    pub(crate) fn new(
        allowed: Vec<String>,
        max_processes: usize,
        client_info: Box<RawValue>,
    ) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                slots: Mutex::new(HashMap::new()),
                allowed,
                max_processes: max_processes.max(1),
                client_info,
                reaper: Mutex::new(None),
            }),
        }
    }

    /// Sends `call` to the backend's process, starting it when needed.
    pub(crate) async fn send(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
    ) -> Result<Reply, UpstreamError> {
        let process = self.process(target).await?;
        let params = call.params.clone();
        let meta = match process.era() {
            Era::Modern => Some(meta::modern(
                target.meta,
                target.client_caps,
                &self.inner.client_info,
                call.progress_token,
            )),
            Era::Legacy => meta::legacy(target.meta, call.progress_token),
        };
        let timeout = Duration::from_millis(target.config.timeout_ms.max(1));
        process.request(call.method, params, meta, call.progress_token, timeout)
    }

    /// What the backend says about itself: its `DiscoverResult` or `InitializeResult`.
    pub(crate) async fn describe(&self, target: &Target<'_>) -> Result<Bytes, UpstreamError> {
        Ok(self.process(target).await?.description())
    }

    /// The live process for `target`, started (or restarted, after its backoff) when needed.
    async fn process(&self, target: &Target<'_>) -> Result<Arc<Process>, UpstreamError> {
        let config = target.config;
        let command = config.command.as_deref().ok_or(UpstreamError::NoUrl)?;
        if !self.inner.allowed.iter().any(|a| a == command) {
            tracing::warn!(
                backend = target.name,
                command,
                "stdio command not on the operator's allow-list"
            );
            return Err(UpstreamError::NotAllowed);
        }
        let key = ProcessKey {
            backend: target.name.to_owned(),
            command: command.to_owned(),
            args: config.args.clone(),
            env: config
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cwd: config.cwd.clone(),
            principal: (config.stdio_policy == StdioPolicy::PerPrincipal).then(|| {
                (
                    target.principal.issuer().to_owned(),
                    target.principal.subject().to_owned(),
                )
            }),
        };
        let slot = self.slot(&key)?;
        let mut slot = slot.lock().await;
        if let Some(process) = slot.process.as_ref().filter(|p| p.alive()) {
            process.touch();
            return Ok(Arc::clone(process));
        }
        if slot.process.take().is_some() {
            // It died since the last call.
            slot.failures = Some((Instant::now(), slot.failures.map_or(1, |(_, n)| n + 1)));
        }
        if let Some((at, n)) = slot.failures
            && at.elapsed() < backoff(n)
        {
            return Err(UpstreamError::ProcessFailed);
        }
        match Process::start(&key, target, &self.inner.client_info).await {
            Ok(process) => {
                slot.failures = None;
                slot.process = Some(Arc::clone(&process));
                if key.principal.is_some() {
                    self.start_reaper();
                }
                Ok(process)
            }
            Err(e) => {
                slot.failures = Some((Instant::now(), slot.failures.map_or(1, |(_, n)| n + 1)));
                Err(e)
            }
        }
    }

    /// The slot of `key`, created when there is room for one more process.
    fn slot(&self, key: &ProcessKey) -> Result<Arc<tokio::sync::Mutex<Slot>>, UpstreamError> {
        let mut slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get(key) {
            return Ok(Arc::clone(slot));
        }
        if slots.len() >= self.inner.max_processes {
            // Forget slots whose process is gone before refusing.
            slots.retain(|_, s| s.try_lock().map_or(true, |s| s.process.is_some()));
            if slots.len() >= self.inner.max_processes {
                tracing::warn!(
                    max = self.inner.max_processes,
                    "too many stdio backend processes"
                );
                return Err(UpstreamError::ProcessFailed);
            }
        }
        let slot = Arc::new(tokio::sync::Mutex::new(Slot::default()));
        slots.insert(key.clone(), Arc::clone(&slot));
        Ok(slot)
    }

    /// Starts the task ending idle `per_principal` processes (once).
    fn start_reaper(&self) {
        let mut reaper = self.inner.reaper.lock().unwrap_or_else(|p| p.into_inner());
        if reaper.is_none() {
            let pool = Arc::downgrade(&self.inner);
            *reaper = Some(tokio::spawn(reap(pool)).abort_handle());
        }
    }
}

/// Ends `per_principal` processes idle for longer than their idle timeout.
async fn reap(pool: Weak<PoolInner>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        let mut slots = pool.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|key, slot| {
            let Ok(mut slot) = slot.try_lock() else {
                return true; // in use right now
            };
            let idle = slot
                .process
                .as_ref()
                .is_some_and(|p| key.principal.is_some() && p.idle() > p.idle_timeout);
            if idle {
                tracing::info!(backend = %key.backend, "ending an idle per-principal stdio backend");
                slot.process = None; // dropping it kills the child
                return false;
            }
            true
        });
    }
}

fn backoff(failures: u32) -> Duration {
    let doubled = BACKOFF_START.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)));
    doubled.min(BACKOFF_MAX)
}

type Waiter = mpsc::UnboundedSender<Result<Bytes, UpstreamError>>;

/// One running backend process.
struct Process {
    backend: String,
    /// The era and the `DiscoverResult`/`InitializeResult`, once the handshake is done.
    identity: std::sync::OnceLock<(Era, Bytes)>,
    stdin: mpsc::UnboundedSender<Vec<u8>>,
    /// Calls waiting for their response, by request id (as JSON).
    waiting: Mutex<HashMap<String, Waiter>>,
    /// The call each progress token belongs to (token -> request id as JSON).
    progress: Mutex<HashMap<String, String>>,
    alive: AtomicBool,
    next: AtomicU64,
    last_used: Mutex<Instant>,
    idle_timeout: Duration,
    /// Kills the child when the process is dropped (reaped by its waiter task).
    _kill: tokio::sync::oneshot::Sender<()>,
}

impl Process {
    async fn start(
        key: &ProcessKey,
        target: &Target<'_>,
        client_info: &RawValue,
    ) -> Result<Arc<Self>, UpstreamError> {
        let mut command = tokio::process::Command::new(&key.command);
        command
            .args(&key.args)
            .env_clear()
            .envs(std::env::var_os("PATH").map(|path| ("PATH", path)))
            .envs(key.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &key.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|e| {
            tracing::warn!(backend = %key.backend, command = %key.command, error = %e, "cannot start a stdio backend");
            UpstreamError::ProcessFailed
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(UpstreamError::ProcessFailed);
        };
        let (to_stdin, from_callers) = mpsc::unbounded_channel();
        let (kill, killed) = tokio::sync::oneshot::channel();
        let idle_timeout = target
            .config
            .idle_timeout_s
            .map_or(DEFAULT_IDLE, Duration::from_secs);
        let process = Arc::new(Self {
            backend: key.backend.clone(),
            identity: std::sync::OnceLock::new(),
            stdin: to_stdin,
            waiting: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            next: AtomicU64::new(1),
            last_used: Mutex::new(Instant::now()),
            idle_timeout,
            _kill: kill,
        });
        tokio::spawn(write_stdin(stdin, from_callers));
        tokio::spawn(read_stderr(key.backend.clone(), stderr));
        tokio::spawn(read_stdout(Arc::downgrade(&process), stdout));
        tokio::spawn(wait_child(key.backend.clone(), child, killed));
        let timeout = Duration::from_millis(target.config.timeout_ms.max(1));
        let identity = process.handshake(target, client_info, timeout).await?;
        let _ = process.identity.set(identity);
        Ok(process)
    }

    /// Probes the era: `server/discover` first, then `initialize` + `notifications/initialized`.
    async fn handshake(
        &self,
        target: &Target<'_>,
        client_info: &RawValue,
        timeout: Duration,
    ) -> Result<(Era, Bytes), UpstreamError> {
        let meta = meta::modern(None, target.client_caps, client_info, None);
        let discover = self.request(
            "server/discover",
            RawObject::new(),
            Some(meta),
            None,
            timeout,
        )?;
        if let Ok(result) = final_result(discover).await
            && RawObject::parse(std::str::from_utf8(&result).unwrap_or("{}"))
                .is_ok_and(|r| r.contains("supportedVersions"))
        {
            return Ok((Era::Modern, result));
        }
        let mut params = RawObject::new();
        params.set_str("protocolVersion", super::LEGACY_PROTOCOL.as_str());
        params.set_raw("capabilities", legacy_capabilities(target.client_caps));
        params.set_borrowed("clientInfo", client_info);
        let initialize = self.request("initialize", params, None, None, timeout)?;
        let result = final_result(initialize).await.map_err(|e| match e {
            UpstreamError::Malformed("backend answered with an error") => {
                UpstreamError::Malformed("backend refused the handshake")
            }
            other => other,
        })?;
        self.write(mcp_core::encode_notification(
            "notifications/initialized",
            None,
        ));
        tracing::info!(backend = %self.backend, "stdio backend started");
        Ok((Era::Legacy, result))
    }

    fn era(&self) -> Era {
        self.identity.get().map_or(Era::Legacy, |(era, _)| *era)
    }

    fn description(&self) -> Bytes {
        self.identity
            .get()
            .map(|(_, d)| d.clone())
            .unwrap_or_default()
    }

    fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    fn write(&self, mut line: Vec<u8>) {
        line.push(b'\n');
        if self.stdin.send(line).is_err() {
            self.alive.store(false, Ordering::Release);
        }
    }

    /// Sends one request; its messages (progress, then the response) arrive on the reply.
    fn request(
        &self,
        method: &str,
        mut params: RawObject<'_>,
        meta: Option<Box<RawValue>>,
        progress_token: Option<&str>,
        timeout: Duration,
    ) -> Result<Reply, UpstreamError> {
        if !self.alive() {
            return Err(UpstreamError::Disconnected);
        }
        let id =
            RequestId::from(format!("g{}", self.next.fetch_add(1, Ordering::Relaxed)).as_str());
        let key = id.to_json().into_owned();
        if let Some(meta) = meta {
            params.set_raw("_meta", meta);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.waiting).insert(key.clone(), tx);
        if let Some(token) = progress_token {
            lock(&self.progress).insert(token.to_owned(), key.clone());
        }
        let params = params.to_raw();
        let has_params = params.get() != "{}";
        self.write(encode_request(&id, method, has_params.then_some(&*params)));
        Ok(Reply {
            id,
            messages: messages(rx, timeout, self.stdin.clone(), key),
            session: None,
        })
    }

    /// A line from stdout: a response, a progress notification, or something else.
    fn dispatch(&self, line: &[u8]) {
        let Ok(env) = Envelope::parse(line) else {
            tracing::debug!(backend = %self.backend, "ignoring a non-JSON-RPC line on stdout");
            return;
        };
        match env.kind() {
            MessageKind::Response | MessageKind::Error => {
                let Some(id) = env.id() else { return };
                let key = id.to_json().into_owned();
                if let Some(waiter) = lock(&self.waiting).remove(&key) {
                    let _ = waiter.send(Ok(Bytes::copy_from_slice(line)));
                }
                lock(&self.progress).retain(|_, call| *call != key);
            }
            MessageKind::Request => {
                // A server's own request (sampling, roots, elicitation): nobody to ask here.
                if let Some(id) = env.id() {
                    let error = mcp_core::ErrorObject::method_not_found(env.method().unwrap_or(""));
                    self.write(encode_error(Some(id), &error));
                }
            }
            MessageKind::Notification => {
                let token = (env.method() == Some("notifications/progress"))
                    .then(|| env.params().and_then(|p| RawObject::from_raw(p).ok()))
                    .flatten()
                    .and_then(|p| {
                        p.get(meta::PROGRESS_TOKEN)
                            .map(|t| t.get().trim_matches('"').to_owned())
                    });
                let call = token.and_then(|t| lock(&self.progress).get(&t).cloned());
                match call.and_then(|c| lock(&self.waiting).get(&c).cloned()) {
                    Some(waiter) => {
                        let _ = waiter.send(Ok(Bytes::copy_from_slice(line)));
                    }
                    None => {
                        tracing::debug!(backend = %self.backend, method = env.method().unwrap_or(""), "dropping a stdio backend notification");
                    }
                }
            }
        }
    }

    /// The process went away: every waiting call fails.
    fn died(&self) {
        self.alive.store(false, Ordering::Release);
        for (_, waiter) in lock(&self.waiting).drain() {
            let _ = waiter.send(Err(UpstreamError::Disconnected));
        }
        lock(&self.progress).clear();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The messages of one call: each must arrive within `timeout`; a caller that drops the stream
/// before the response tells the process with `notifications/cancelled`.
fn messages(
    rx: mpsc::UnboundedReceiver<Result<Bytes, UpstreamError>>,
    timeout: Duration,
    stdin: mpsc::UnboundedSender<Vec<u8>>,
    key: String,
) -> MessageStream {
    struct Pending {
        rx: mpsc::UnboundedReceiver<Result<Bytes, UpstreamError>>,
        stdin: mpsc::UnboundedSender<Vec<u8>>,
        key: String,
        done: bool,
    }
    impl Drop for Pending {
        fn drop(&mut self) {
            if !self.done {
                let mut params = RawObject::new();
                if let Ok(id) = RawValue::from_string(self.key.clone()) {
                    params.set_raw("requestId", id);
                }
                let mut line = mcp_core::encode_notification(
                    "notifications/cancelled",
                    Some(&params.to_raw()),
                );
                line.push(b'\n');
                let _ = self.stdin.send(line);
            }
        }
    }
    let call = Pending {
        rx,
        stdin,
        key,
        done: false,
    };
    Box::pin(futures_util::stream::unfold(
        call,
        move |mut call| async move {
            if call.done {
                return None;
            }
            match tokio::time::timeout(timeout, call.rx.recv()).await {
                Ok(Some(Ok(message))) => {
                    let last = Envelope::parse(&message).is_ok_and(|e| {
                        matches!(e.kind(), MessageKind::Response | MessageKind::Error)
                    });
                    call.done = last;
                    Some((Ok(message), call))
                }
                Ok(Some(Err(e))) => {
                    call.done = true;
                    Some((Err(e), call))
                }
                Ok(None) => {
                    call.done = true;
                    Some((Err(UpstreamError::Disconnected), call))
                }
                Err(_) => Some((Err(UpstreamError::Timeout(timeout)), call)),
            }
        },
    ))
}

async fn write_stdin(
    mut stdin: tokio::process::ChildStdin,
    mut lines: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(line) = lines.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

async fn read_stdout(process: Weak<Process>, stdout: tokio::process::ChildStdout) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        let Some(process) = process.upgrade() else {
            return;
        };
        match read {
            Ok(0) | Err(_) => {
                process.died();
                return;
            }
            Ok(_) if line.last() != Some(&b'\n') && line.len() >= MAX_LINE => {
                tracing::warn!(backend = %process.backend, "stdio backend sent a message over 16 MiB");
                process.died();
                return;
            }
            Ok(_) => process.dispatch(line.trim_ascii_end()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_backoff_doubles_up_to_five_seconds() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(4), Duration::from_millis(800));
        assert_eq!(backoff(10), BACKOFF_MAX);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }
}
