//! [`TestBackend`]: the handle tests hold.

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use crate::{
    counters::ToolCalls,
    http_server::{self, MCP_PATH, Running},
    recorder::{RecordedRequest, RequestLog},
    server::{Shared, Touched},
    spec::{BackendSpec, Era},
};

/// How long [`TestBackend::restart`] keeps trying to take its port back.
const REBIND_PATIENCE: Duration = Duration::from_secs(5);

/// A running MCP backend on `http://127.0.0.1:<port>/mcp`.
///
/// Dropping the handle stops the backend. Counters and the request log live as long as the
/// handle, across [`stop`](Self::stop) and [`restart`](Self::restart).
pub struct TestBackend {
    shared: Arc<Shared>,
    log: Arc<RequestLog>,
    addr: SocketAddr,
    running: Mutex<Option<Running>>,
}

impl std::fmt::Debug for TestBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestBackend")
            .field("name", &self.shared.spec.name)
            .field("era", &self.shared.spec.era)
            .field("addr", &self.addr)
            .field("running", &self.is_running())
            .finish()
    }
}

impl TestBackend {
    /// Starts `spec` on 127.0.0.1 (on `spec.port`, or a free port).
    ///
    /// # Panics
    ///
    /// When the port cannot be bound; see [`try_start`](Self::try_start).
    pub async fn start(spec: BackendSpec) -> TestBackend {
        Self::try_start(spec)
            .await
            .expect("test backend should bind 127.0.0.1")
    }

    /// Starts `spec` on 127.0.0.1, or fails when the port cannot be bound.
    pub async fn try_start(spec: BackendSpec) -> std::io::Result<TestBackend> {
        Self::try_start_at(Ipv4Addr::LOCALHOST.into(), spec).await
    }

    /// Starts `spec` on another local address (e.g. `127.0.0.2`, for tests of destination
    /// rules), or fails when it cannot be bound.
    pub async fn try_start_at(
        ip: std::net::IpAddr,
        spec: BackendSpec,
    ) -> std::io::Result<TestBackend> {
        let listener = http_server::bind(SocketAddr::from((ip, spec.port)))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(spec));
        let log = Arc::new(RequestLog::default());
        let running = Running::spawn(listener, shared.clone(), log.clone());
        Ok(TestBackend {
            shared,
            log,
            addr,
            running: Mutex::new(Some(running)),
        })
    }

    /// `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// The listening address (kept across restarts).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        &self.shared.spec.name
    }

    /// The backend's era.
    pub fn era(&self) -> Era {
        self.shared.spec.era
    }

    /// The spec the backend was started with.
    pub fn spec(&self) -> &BackendSpec {
        &self.shared.spec
    }

    /// True between start/restart and stop.
    pub fn is_running(&self) -> bool {
        self.lock_running().is_some()
    }

    /// Closes the listener and every open connection (streams included) and cancels in-flight
    /// handlers. Afterwards connecting is refused. Does nothing when already stopped.
    ///
    /// With [`BackendSpec::tasks`], running tasks are aborted (counted as cancelled) and every
    /// task is forgotten: after a [`restart`](Self::restart) their ids are unknown (`-32602`).
    pub async fn stop(&self) {
        let running = self.lock_running().take();
        if let Some(running) = running {
            running.stop().await;
        }
        self.shared.tasks.shutdown();
    }

    /// Stops (if running), then serves again on the same port with fresh rmcp state: old
    /// legacy sessions are unknown (`404`).
    ///
    /// # Panics
    ///
    /// When the port cannot be taken back within a few seconds.
    pub async fn restart(&self) {
        self.stop().await;
        let deadline = Instant::now() + REBIND_PATIENCE;
        let listener = loop {
            match http_server::bind(self.addr) {
                Ok(listener) => break listener,
                Err(error) if Instant::now() >= deadline => {
                    panic!("test backend could not rebind {}: {error}", self.addr)
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let running = Running::spawn(listener, self.shared.clone(), self.log.clone());
        *self.lock_running() = Some(running);
    }

    /// Every HTTP request received so far (since the last [`clear_requests`](Self::clear_requests)),
    /// in arrival order, recorded before any MCP processing.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.snapshot()
    }

    /// The recorded requests whose JSON-RPC `method` is `method`.
    pub fn requests_for(&self, method: &str) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|request| request.jsonrpc_method().as_deref() == Some(method))
            .collect()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        self.log.clear();
    }

    /// Started/finished/cancelled counts for `tool`.
    pub fn calls(&self, tool: &str) -> ToolCalls {
        self.shared.counters.get(tool)
    }

    /// Calls of `tool` whose handler began.
    pub fn calls_started(&self, tool: &str) -> u64 {
        self.calls(tool).started
    }

    /// Calls of `tool` that ended early: handler dropped or cancellation observed.
    pub fn calls_cancelled(&self, tool: &str) -> u64 {
        self.calls(tool).cancelled
    }

    /// Calls of `tool` whose handler returned.
    pub fn calls_finished(&self, tool: &str) -> u64 {
        self.calls(tool).finished
    }

    /// Polls `tool`'s counters every 10 ms until `condition` holds (true) or `timeout` passes
    /// (false).
    pub async fn wait_for_calls(
        &self,
        tool: &str,
        timeout: Duration,
        condition: impl Fn(ToolCalls) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if condition(self.calls(tool)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends change notifications now, as the `touch` tool does: `notifications/resources/updated`
    /// for `uri` (when given) to the open `subscriptions/listen` streams that accepted it and the
    /// legacy sessions that subscribed to it, then `notifications/resources/list_changed` and
    /// `notifications/tools/list_changed` to every stream that accepted them and every legacy
    /// session (on its GET stream; a message sent while no GET stream is open is lost).
    pub async fn touch(&self, uri: Option<&str>) -> Touched {
        self.shared.listeners.touch(uri).await
    }

    /// Open `subscriptions/listen` streams (acknowledged, not yet closed).
    pub fn subscriptions(&self) -> usize {
        self.shared.listeners.subscriptions()
    }

    /// Live legacy sessions that subscribed to `uri` with `resources/subscribe`.
    pub fn sessions_subscribed_to(&self, uri: &str) -> usize {
        self.shared.listeners.sessions_subscribed_to(uri)
    }

    /// The raw task ids this backend minted for `long_task` calls (see [`BackendSpec::tasks`]),
    /// oldest first, across restarts. A gateway should never show them to its clients.
    pub fn task_ids(&self) -> Vec<String> {
        self.shared.tasks.ids()
    }

    /// Tasks still `working` (not completed, failed or cancelled).
    pub fn running_tasks(&self) -> usize {
        self.shared.tasks.running()
    }

    /// Polls every 10 ms until `condition(self)` holds (true) or `timeout` passes (false).
    pub async fn wait_until(
        &self,
        timeout: Duration,
        condition: impl Fn(&TestBackend) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if condition(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        // Only ever replaced whole: a panic cannot leave it half-written.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TestBackend {
    fn drop(&mut self) {
        // Tasks run on their own tokio tasks: without this they would outlive the backend.
        self.shared.tasks.shutdown();
    }
}
