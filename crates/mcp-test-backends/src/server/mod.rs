//! The rmcp [`ServerHandler`] every backend runs: tools, resources, prompts, completion,
//! logging and change notifications (`subscriptions/listen`, `resources/subscribe`), shaped by the
//! backend's [`BackendSpec`].

mod ask;
mod changes;
mod logging;
mod pagination;
mod prompts;
mod resources;
mod sample;
mod slow;
pub(crate) mod tasks;
mod tools;

use std::{
    borrow::Cow,
    sync::{Arc, Mutex},
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams,
        CompleteRequestParams, CompleteResult, DiscoverResult, GetPromptRequestParams,
        GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
        ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
        ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
        UpdateTaskParams,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};

use crate::{
    counters::CallCounters,
    spec::{BackendSpec, Era},
};

pub(crate) use changes::Listeners;
pub use changes::Touched;
pub(crate) use logging::SessionLogLevel;
pub(crate) use tasks::Tasks;

/// State shared by every handler instance of one backend, kept across restarts.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) spec: BackendSpec,
    pub(crate) counters: Arc<CallCounters>,
    pub(crate) ask: ask::AskCodec,
    /// Open `subscriptions/listen` streams and legacy sessions, for change notifications.
    pub(crate) listeners: Arc<Listeners>,
    /// The tasks `long_task` made (only with [`BackendSpec::tasks`]).
    pub(crate) tasks: Tasks,
}

impl Shared {
    pub(crate) fn new(spec: BackendSpec) -> Self {
        Self {
            spec,
            counters: Arc::default(),
            ask: ask::AskCodec::new(),
            listeners: Arc::default(),
            tasks: Tasks::default(),
        }
    }

    fn name(&self) -> &str {
        &self.spec.name
    }
}

/// One handler instance. rmcp makes a new one per legacy session and per stateless request, so
/// `log_level` (what `logging/setLevel` set) and `subscriptions` (what `resources/subscribe`
/// asked for) are per session.
#[derive(Debug, Clone)]
pub(crate) struct TestServer {
    shared: Arc<Shared>,
    log_level: SessionLogLevel,
    subscriptions: Arc<changes::SessionSubscriptions>,
}

impl TestServer {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            log_level: Arc::new(Mutex::new(None)),
            subscriptions: Arc::default(),
        }
    }

    /// Applies the configured cache hints; only modern peers get them from us (rmcp fills
    /// `0`/`private` on the modern results we leave alone).
    fn cache_hints(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> (Option<u64>, Option<CacheScope>) {
        if is_modern(context) {
            (self.shared.spec.ttl_ms, self.shared.spec.cache_scope)
        } else {
            (None, None)
        }
    }
}

/// True when the request was made under 2026-07-28 or later.
pub(crate) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        #[expect(
            deprecated,
            reason = "logging is deprecated by SEP-2577 but both eras still use it"
        )]
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            // `touch` (and `TestBackend::touch`) send these.
            .enable_tool_list_changed()
            .enable_resources_list_changed()
            .enable_resources_subscribe();
        let capabilities = if self.shared.spec.tasks && self.shared.spec.era.speaks_modern() {
            capabilities.enable_tasks().build()
        } else {
            capabilities.build()
        };
        let mut info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.shared.spec.name.clone(),
            env!("CARGO_PKG_VERSION"),
        ));
        if let Some(instructions) = &self.shared.spec.instructions {
            info = info.with_instructions(instructions.clone());
        }
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        match self.shared.spec.era {
            Era::Modern => Cow::Owned(vec![ProtocolVersion::V_2026_07_28]),
            Era::Legacy => Cow::Borrowed(ProtocolVersion::known_up_to(
                &ProtocolVersion::LATEST_WITH_INITIALIZE,
            )),
            Era::Both => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let mut result = DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        );
        if let Some(ttl_ms) = self.shared.spec.ttl_ms {
            result = result.with_ttl_ms(ttl_ms);
        }
        if let Some(scope) = self.shared.spec.cache_scope {
            result = result.with_cache_scope(scope);
        }
        Ok(result)
    }

    #[expect(
        deprecated,
        reason = "logging/setLevel is deprecated by SEP-2577 but legacy clients send it"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        logging::set_session_level(&self.log_level, request.level);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Only legacy sessions initialize: from now on they hear about changes on their GET stream.
        self.shared
            .listeners
            .register_session(&context.peer, &self.subscriptions);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(changes::accepted_filter(self.shared.name(), requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let _registered = self
            .shared
            .listeners
            .add_subscription(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let backend = self.shared.name();
        if !resources::exists(backend, &request.uri) {
            return Err(resources::not_found(&request.uri));
        }
        self.subscriptions.subscribe(&request.uri);
        self.shared
            .listeners
            .register_session(&context.peer, &self.subscriptions);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let all = tools::all(&self.shared.spec);
        let (tools, next_cursor) = pagination::page(&self.shared.spec, "tools", &all, &request)?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next_cursor;
        (result.ttl_ms, result.cache_scope) = self.cache_hints(&context);
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::all(&self.shared.spec)
            .into_iter()
            .find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        tools::call(&self.shared, &self.log_level, request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self.shared.tasks.manager().get_task(&request.task_id)?;
        Ok(GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .tasks
            .manager()
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.manager().cancel_task(&request.task_id)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let all = prompts::all();
        let (prompts, next_cursor) =
            pagination::page(&self.shared.spec, "prompts", &all, &request)?;
        let mut result = ListPromptsResult::with_all_items(prompts);
        result.next_cursor = next_cursor;
        (result.ttl_ms, result.cache_scope) = self.cache_hints(&context);
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        prompts::get(self.shared.name(), &request).map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        prompts::complete(self.shared.name(), &request)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all = resources::all(self.shared.name());
        let (resources, next_cursor) =
            pagination::page(&self.shared.spec, "resources", &all, &request)?;
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next_cursor;
        (result.ttl_ms, result.cache_scope) = self.cache_hints(&context);
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let all = resources::templates(self.shared.name());
        let (templates, next_cursor) =
            pagination::page(&self.shared.spec, "resource-templates", &all, &request)?;
        let mut result = ListResourceTemplatesResult::with_all_items(templates);
        result.next_cursor = next_cursor;
        (result.ttl_ms, result.cache_scope) = self.cache_hints(&context);
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let mut result = resources::read(self.shared.name(), &request.uri)?;
        (result.ttl_ms, result.cache_scope) = self.cache_hints(&context);
        Ok(result.into())
    }
}
