//! What a backend is: its name, protocol era and list/caching options.

use rmcp::model::CacheScope;

/// Which MCP protocol revisions a backend speaks, and so how it answers on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// Only 2026-07-28: stateless, per-request `_meta`, `server/discover`, MRTR.
    ///
    /// `initialize` is refused with JSON-RPC `-32022` (unsupported protocol version, data
    /// `{"supported":["2026-07-28"],"requested":…}`), requests without `MCP-Protocol-Version` /
    /// `_meta` protocol version get HTTP 400, GET and DELETE get 405.
    Modern,
    /// Only the revisions up to 2025-11-25: `initialize` + `Mcp-Session-Id` sessions.
    ///
    /// Anything modern-shaped (a `server/discover` or `subscriptions/listen` POST, a POST whose
    /// `MCP-Protocol-Version` header or `_meta` protocol version is 2026-07-28 or later) gets
    /// HTTP 400 with the body [`LEGACY_REJECTION_BODY`](crate::LEGACY_REJECTION_BODY), like a
    /// legacy-only server that finds no session.
    Legacy,
    /// rmcp's default dual-era server: modern requests are served statelessly, `initialize`
    /// opens a legacy session.
    Both,
}

impl Era {
    /// `"modern"`, `"legacy"` or `"both"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
            Era::Both => "both",
        }
    }

    /// True when the backend answers 2026-07-28 requests.
    pub fn speaks_modern(self) -> bool {
        matches!(self, Era::Modern | Era::Both)
    }

    /// True when the backend answers `initialize` and keeps legacy sessions.
    pub fn speaks_legacy(self) -> bool {
        matches!(self, Era::Legacy | Era::Both)
    }
}

impl std::fmt::Display for Era {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that shapes a [`TestBackend`](crate::TestBackend).
///
/// Build one with [`BackendSpec::new`] (or [`modern`](BackendSpec::modern),
/// [`legacy`](BackendSpec::legacy), [`both`](BackendSpec::both)) and the builder methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSpec {
    /// Server name: reported as `serverInfo.name`, used in URIs (`test://<name>/…`) and as the
    /// `<name>:` prefix of every text result.
    pub name: String,
    /// Protocol era.
    pub era: Era,
    /// When set, `tools/list`, `prompts/list`, `resources/list` and `resources/templates/list`
    /// return at most this many items per page with an opaque `nextCursor`.
    pub page_size: Option<usize>,
    /// `ttlMs` put on modern list, read and discover results (rmcp fills `0` when unset).
    pub ttl_ms: Option<u64>,
    /// `cacheScope` put on modern list, read and discover results (rmcp fills `private` when
    /// unset).
    pub cache_scope: Option<CacheScope>,
    /// Number of extra echo tools `tool_00` … appended to the tool list.
    pub extra_tools: usize,
    /// `instructions` in the initialize and discover results.
    pub instructions: Option<String>,
    /// Answer with `application/json` instead of SSE where rmcp can (simple request/response).
    pub json_response: bool,
    /// Port to listen on (`0`, the default, picks a free one).
    pub port: u16,
    /// Keep every request in [`TestBackend::requests`](crate::TestBackend::requests) (the
    /// default). Turn off for load tests, where the log would grow without bound.
    pub record_requests: bool,
    /// Offer the tool `touch {uri?}`, which sends change notifications (see
    /// [`TestBackend::touch`](crate::TestBackend::touch)). Off by default, so the tool list
    /// stays the seven fixed tools.
    pub touch_tool: bool,
    /// Offer the tasks extension (`io.modelcontextprotocol/tasks`) and the tool
    /// `long_task {delay_ms}` (see [`BackendSpec::tasks`]). Off by default, so the tool list
    /// stays the seven fixed tools.
    pub tasks: bool,
    /// Offer the tool `sample {prompt}`, which asks the client for a sampling completion
    /// mid-call (`sampling/createMessage` in 2025 sessions, an `input_required` round in
    /// 2026-07-28). Off by default, so the tool list stays the seven
    /// fixed tools.
    pub sampling_tool: bool,
}

impl BackendSpec {
    /// A backend called `name` speaking `era`, with no pagination, no cache hints, no extra
    /// tools and no instructions.
    pub fn new(name: impl Into<String>, era: Era) -> Self {
        Self {
            name: name.into(),
            era,
            page_size: None,
            ttl_ms: None,
            cache_scope: None,
            extra_tools: 0,
            instructions: None,
            json_response: false,
            port: 0,
            record_requests: true,
            touch_tool: false,
            tasks: false,
            sampling_tool: false,
        }
    }

    /// Shorthand for `BackendSpec::new(name, Era::Modern)`.
    pub fn modern(name: impl Into<String>) -> Self {
        Self::new(name, Era::Modern)
    }

    /// Shorthand for `BackendSpec::new(name, Era::Legacy)`.
    pub fn legacy(name: impl Into<String>) -> Self {
        Self::new(name, Era::Legacy)
    }

    /// Shorthand for `BackendSpec::new(name, Era::Both)`.
    pub fn both(name: impl Into<String>) -> Self {
        Self::new(name, Era::Both)
    }

    /// Paginate the four list methods with `page_size` items per page (at least 1).
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.page_size = Some(page_size.max(1));
        self
    }

    /// Put `ttlMs: ttl_ms` on modern cacheable results.
    pub fn ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }

    /// Put `cacheScope` on modern cacheable results.
    pub fn cache_scope(mut self, cache_scope: CacheScope) -> Self {
        self.cache_scope = Some(cache_scope);
        self
    }

    /// Append `count` echo tools named `tool_00`, `tool_01`, … (wider numbers past 100).
    pub fn extra_tools(mut self, count: usize) -> Self {
        self.extra_tools = count;
        self
    }

    /// Server instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Prefer `application/json` responses (rmcp `json_response`).
    pub fn json_response(mut self, json_response: bool) -> Self {
        self.json_response = json_response;
        self
    }

    /// Listen on this port of 127.0.0.1 instead of a free one.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Record requests for [`TestBackend::requests`](crate::TestBackend::requests) or not.
    pub fn record_requests(mut self, record: bool) -> Self {
        self.record_requests = record;
        self
    }

    /// Offer the tool `sample {prompt}` (after `long_task`, before the extra tools): on a 2025
    /// session it sends `sampling/createMessage` with `prompt` as the user message and answers
    /// `<name>: sampled <text of the client's answer>`; a 2026-07-28 request gets the same request
    /// as an `input_required` round (`inputRequests.sample`), answered by the retry's
    /// `inputResponses.sample` (`-32021` for a client that did not declare sampling).
    pub fn sampling_tool(mut self, sampling_tool: bool) -> Self {
        self.sampling_tool = sampling_tool;
        self
    }

    /// Offer the tool `touch {uri?}` (after `headers`, before the extra tools), which does what
    /// [`TestBackend::touch`](crate::TestBackend::touch) does.
    pub fn touch_tool(mut self, touch_tool: bool) -> Self {
        self.touch_tool = touch_tool;
        self
    }

    /// Offer the tool `long_task {delay_ms}` (after `touch`, before the extra tools) and, on
    /// [`Era::Modern`] and [`Era::Both`] backends, the tasks extension
    /// (`io.modelcontextprotocol/tasks` in the capabilities' `extensions`, `tasks/get`,
    /// `tasks/update`, `tasks/cancel`). A 2026-07-28 `long_task` call whose `clientCapabilities`
    /// declare the extension is answered at once with a `resultType: "task"` handle; the task
    /// completes after `delay_ms` with text `<name>: task done`. Without the declaration (or on a
    /// legacy session) the call runs synchronously to the same result.
    pub fn tasks(mut self, tasks: bool) -> Self {
        self.tasks = tasks;
        self
    }
}
