//! The reference gateway on an embedded default, with two demo MCP backends in the same process.
//!
//! ```text
//! cargo run --release --example gateway
//! ```
//!
//! - starts two rmcp backends on free loopback ports: `clock` (current time in any IANA time
//!   zone, conversions between zones, the zone list as a resource, a meeting-planning prompt) and
//!   `notes` (an in-memory notes store: add, list, search, delete; every note as a resource; a
//!   summary prompt);
//! - writes the bundled `examples/gateway/users.json` with the backends' real ports to a temp
//!   directory and starts the gateway through the `mcp-gateway` library with the bundled
//!   `examples/gateway/gateway.toml` (file config store, local sessions), environment overrides
//!   applied (`MCP_GATEWAY_LISTEN_ADDR=127.0.0.1:0` picks a free port; when 8080 or 9090 is taken
//!   the example falls back to free ports by itself);
//! - prints `MCP_GATEWAY_URL=...` and `MCP_GATEWAY_TOKEN=...` (a token for subject `demo`, valid
//!   24 h, signed with `$MCP_GATEWAY_JWT_SECRET` or a random secret), a ready `curl` command and an
//!   rmcp one-liner; serves until Ctrl-C / SIGTERM.

// An example that talks to the person running it: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use mcp_config_store::UsersDocument;
use mcp_gateway::config::GatewayConfig;
use mcp_gateway::config::{EffectiveConfig, Override};
use mcp_gateway::token::{TokenRequest, mint};
use mcp_gateway::{BoundGateway, Gateway, GatewayError};
use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{
    ErrorData, RoleServer, ServerHandler, prompt, prompt_handler, prompt_router, schemars, tool,
    tool_handler, tool_router,
};
use serde::Deserialize;
use tokio::net::TcpListener;

/// The subject and virtual host of the bundled users file.
const SUBJECT: &str = "demo";
const VHOST: &str = "demo";

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway");

    // 1. Two demo backends on free loopback ports.
    let clock = serve_backend(ClockServer::new).await?;
    let notes_store = NotesStore::default();
    let notes = serve_backend(move || NotesServer::new(notes_store.clone())).await?;

    // 2. The bundled users file with the real backend ports, in a temp directory.
    let runtime_dir =
        std::env::temp_dir().join(format!("mcp-gateway-example-{}", std::process::id()));
    std::fs::create_dir_all(&runtime_dir)?;
    let users_path = runtime_dir.join("users.json");
    write_users(
        &bundled.join("users.json"),
        &users_path,
        &[("clock", clock), ("notes", notes)],
    )?;

    // 3. The bundled gateway.toml, MCP_GATEWAY_* environment overrides, the runtime users file.
    let overrides = [Override::new(
        "config_store.path",
        users_path.display().to_string(),
        "(example: users file with the real backend ports)",
    )];
    let effective = EffectiveConfig::from_sources(
        Some(&bundled.join("gateway.toml")),
        std::env::vars(),
        &overrides,
    )?;
    let config = effective.build()?;
    // Kept to the end: dropping it flushes the last spans (with an OTLP endpoint configured).
    let _telemetry = mcp_gateway::init_tracing(&config.telemetry)
        .inspect_err(|e| eprintln!("logging: {e}"))
        .ok();
    let secret = match std::env::var("MCP_GATEWAY_JWT_SECRET") {
        Ok(s) if !s.is_empty() => s.into_bytes(),
        _ => random_secret(),
    };

    // 4. Bind (falling back to free ports when the configured ones are taken) and serve.
    let bound = bind(config.clone(), &secret).await?;
    let url = bound.endpoint_url(VHOST);
    let token = mint(
        &config,
        &secret,
        &TokenRequest::new(SUBJECT).ttl(Duration::from_secs(24 * 3600)),
    )?;
    print_instructions(&url, &token, bound.admin_addr());

    let served = bound.serve(mcp_gateway::shutdown_signal()).await;
    let _ = std::fs::remove_dir_all(&runtime_dir);
    served?;
    Ok(())
}

/// Builds and binds the gateway; when a configured port is in use, retries on free ports.
async fn bind(config: GatewayConfig, secret: &[u8]) -> Result<BoundGateway, GatewayError> {
    let gateway = Gateway::builder(config.clone())
        .hs256_secret(secret.to_vec())
        .build()
        .await?;
    match gateway.bind().await {
        Err(GatewayError::Bind { addr, source, .. })
            if source.kind() == std::io::ErrorKind::AddrInUse =>
        {
            eprintln!(
                "{addr} is in use; using free ports instead (set MCP_GATEWAY_LISTEN_ADDR to choose)"
            );
            let mut config = config;
            config.listen.addr = SocketAddr::from(([127, 0, 0, 1], 0));
            if config.listen.admin_addr.is_some() {
                config.listen.admin_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            }
            Gateway::builder(config)
                .hs256_secret(secret.to_vec())
                .build()
                .await?
                .bind()
                .await
        }
        other => other,
    }
}

fn print_instructions(url: &str, token: &str, admin: Option<SocketAddr>) {
    println!("MCP_GATEWAY_URL={url}");
    println!("MCP_GATEWAY_TOKEN={token}");
    println!();
    println!("# List the tools of both demo backends (MCP 2026-07-28, stateless):");
    println!(
        "curl -sS '{url}' -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{{}}}}}}}}'"
    );
    println!();
    println!(
        "# The same from Rust with the official SDK (rmcp 3.11, features client + transport-streamable-http-client-reqwest):"
    );
    println!(
        "let tools = ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(\"{url}\").auth_header(\"{token}\")), ClientLifecycleMode::Discover {{ preferred_versions: vec![ProtocolVersion::V_2026_07_28] }}).await?.list_all_tools().await?;"
    );
    if let Some(admin) = admin {
        println!();
        println!(
            "# Metrics and health: http://{admin}/metrics  http://{admin}/healthz  http://{admin}/readyz"
        );
    }
    println!("# Ctrl-C stops the gateway (in-flight calls are drained first).");
}

/// The bundled users file with each named backend's URL pointing at its real address.
fn write_users(
    template: &Path,
    out: &PathBuf,
    backends: &[(&str, SocketAddr)],
) -> Result<(), Box<dyn Error>> {
    let mut doc = UsersDocument::from_json_str(&std::fs::read_to_string(template)?)?;
    for user in doc.users.values_mut() {
        let user = Arc::make_mut(user);
        for vhost in user.virtual_hosts.values_mut() {
            let vhost = Arc::make_mut(vhost);
            for (name, addr) in backends {
                if let Some(backend) = vhost.backends.get_mut(*name) {
                    backend.url = Some(format!("http://{addr}/mcp").parse()?);
                }
            }
        }
    }
    std::fs::write(out, serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}

/// 32 random bytes from the OS, hex-encoded (a development secret for this run).
fn random_secret() -> Vec<u8> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        // No /dev/urandom: mix the standard library's per-process random hasher keys.
        use std::hash::{BuildHasher, Hasher};
        for chunk in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .into_bytes()
}

/// Serves an rmcp handler at `http://127.0.0.1:<free port>/mcp`, for the life of the process.
async fn serve_backend<H, F>(make: F) -> std::io::Result<SocketAddr>
where
    H: ServerHandler + Send + 'static,
    F: Fn() -> H + Send + Sync + 'static,
{
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    // Loopback-only backends: the gateway sends the backend's own Host, any Host is fine here.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service: StreamableHttpService<H, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(make()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let service = TowerToHyperService::new(Mcp(service.clone()));
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// Routes `/mcp` to rmcp and answers 404 elsewhere.
#[derive(Clone)]
struct Mcp<S>(S);

impl<S, B> tower::Service<http::Request<B>> for Mcp<S>
where
    S: tower::Service<http::Request<B>, Error = Infallible> + Clone + Send + 'static,
    S::Response: Send,
    S::Future: Send + 'static,
    S: tower::Service<
            http::Request<B>,
            Response = http::Response<
                http_body_util::combinators::BoxBody<bytes::Bytes, Infallible>,
            >,
        >,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<S::Response, Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() == "/mcp" {
            let fut = self.0.call(req);
            Box::pin(fut)
        } else {
            Box::pin(async {
                use http_body_util::BodyExt;
                let body =
                    http_body_util::Full::new(bytes::Bytes::from_static(b"Not Found")).boxed();
                let mut res = http::Response::new(body);
                *res.status_mut() = http::StatusCode::NOT_FOUND;
                Ok(res)
            })
        }
    }
}

// ===== the clock backend =====

/// Tells the time in IANA time zones and converts between them.
#[derive(Clone)]
struct ClockServer {
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct NowArgs {
    /// IANA time zone, e.g. "Europe/Paris" or "America/New_York" (default "UTC").
    time_zone: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ConvertArgs {
    /// Local date and time, e.g. "2026-03-01T09:30" or "2026-03-01 09:30".
    time: String,
    /// IANA time zone of `time`.
    from_time_zone: String,
    /// IANA time zone to convert to.
    to_time_zone: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ZonesArgs {
    /// Only zones whose name contains this text (case-insensitive), e.g. "europe" or "york".
    filter: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct MeetingArgs {
    /// Comma-separated IANA time zones of the participants.
    time_zones: String,
    /// Meeting length in minutes.
    minutes: Option<u32>,
}

fn zone(name: &str) -> Result<jiff::tz::TimeZone, ErrorData> {
    jiff::tz::TimeZone::get(name.trim()).map_err(|_| {
        ErrorData::invalid_params(
            format!("unknown time zone `{name}`: use an IANA name such as Europe/Paris (see the list_time_zones tool)"),
            None,
        )
    })
}

fn describe(time: &jiff::Zoned) -> String {
    format!(
        "{} ({}, UTC{})",
        time.strftime("%A %Y-%m-%d %H:%M:%S"),
        time.time_zone().iana_name().unwrap_or("?"),
        time.strftime("%:z")
    )
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

#[tool_router]
impl ClockServer {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    #[tool(description = "Current date and time in an IANA time zone (default UTC)")]
    async fn now(
        &self,
        Parameters(args): Parameters<NowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let tz = zone(args.time_zone.as_deref().unwrap_or("UTC"))?;
        Ok(text(describe(&jiff::Zoned::now().with_time_zone(tz))))
    }

    #[tool(
        description = "Convert a local date and time from one IANA time zone to another (daylight saving aware)"
    )]
    async fn convert_time(
        &self,
        Parameters(args): Parameters<ConvertArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let from = zone(&args.from_time_zone)?;
        let to = zone(&args.to_time_zone)?;
        let local: jiff::civil::DateTime =
            args.time
                .trim()
                .replacen(' ', "T", 1)
                .parse()
                .map_err(|e| {
                    ErrorData::invalid_params(
                        format!("cannot read `{}` as a date and time: {e}", args.time),
                        None,
                    )
                })?;
        let start = local
            .to_zoned(from)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let converted = start.with_time_zone(to);
        Ok(text(format!(
            "{} = {}",
            describe(&start),
            describe(&converted)
        )))
    }

    #[tool(description = "IANA time zone names known to the clock, optionally filtered")]
    async fn list_time_zones(
        &self,
        Parameters(args): Parameters<ZonesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let filter = args.filter.unwrap_or_default().to_lowercase();
        let names: Vec<String> = all_zones()
            .into_iter()
            .filter(|n| n.to_lowercase().contains(&filter))
            .collect();
        Ok(text(if names.is_empty() {
            "no time zone matches".to_owned()
        } else {
            names.join("\n")
        }))
    }
}

fn all_zones() -> Vec<String> {
    let mut names: Vec<String> = jiff::tz::db()
        .available()
        .map(|n| n.as_str().to_owned())
        .collect();
    names.sort();
    names
}

#[prompt_router]
impl ClockServer {
    /// Finds a meeting slot that is inside working hours for everyone.
    #[prompt(
        name = "plan_meeting",
        description = "Find a meeting time that suits participants in several time zones"
    )]
    async fn plan_meeting(&self, Parameters(args): Parameters<MeetingArgs>) -> Vec<PromptMessage> {
        let minutes = args.minutes.unwrap_or(30);
        vec![PromptMessage::new_text(
            Role::User,
            format!(
                "Participants are in these time zones: {}. Use the clock tools (now, convert_time) to find the next {minutes}-minute slot that falls between 09:00 and 17:00 local time for every participant, and list the slot in each zone.",
                args.time_zones
            ),
        )]
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for ClockServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("demo-clock", env!("CARGO_PKG_VERSION")))
        .with_instructions("Time in any IANA time zone, conversions between zones.")
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let zones = Resource::new("clock://time-zones", "time-zones")
            .with_description("Every IANA time zone name the clock knows, one per line")
            .with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![zones]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != "clock://time-zones" {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let contents = ResourceContents::text(all_zones().join("\n"), request.uri)
            .with_mime_type("text/plain");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

// ===== the notes backend =====

/// One note.
#[derive(Clone, Debug)]
struct Note {
    title: String,
    body: String,
    tags: Vec<String>,
    created: jiff::Timestamp,
}

/// Notes shared by every request of the backend (rmcp makes a handler per request or session).
#[derive(Clone, Default)]
struct NotesStore(Arc<Mutex<(u64, BTreeMap<u64, Note>)>>);

impl NotesStore {
    fn with<T>(&self, f: impl FnOnce(&mut (u64, BTreeMap<u64, Note>)) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn render_note(id: u64, note: &Note) -> String {
    let tags = if note.tags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", note.tags.join(", "))
    };
    format!(
        "#{id} {}{tags} ({})\n{}",
        note.title,
        note.created.strftime("%Y-%m-%d %H:%M UTC"),
        note.body
    )
}

#[derive(Clone)]
struct NotesServer {
    store: NotesStore,
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct AddNoteArgs {
    /// A short title.
    title: String,
    /// The note's text.
    body: String,
    /// Optional tags, e.g. ["work", "ideas"].
    tags: Option<Vec<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ListNotesArgs {
    /// Only notes with this tag.
    tag: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SearchNotesArgs {
    /// Text to look for in titles and bodies (case-insensitive).
    query: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct DeleteNoteArgs {
    /// The note's number, as shown by list_notes.
    id: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SummarizeArgs {
    /// Only notes with this tag.
    tag: Option<String>,
}

#[tool_router]
impl NotesServer {
    fn new(store: NotesStore) -> Self {
        Self {
            store,
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    #[tool(description = "Add a note; returns its number")]
    async fn add_note(
        &self,
        Parameters(args): Parameters<AddNoteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if args.title.trim().is_empty() {
            return Err(ErrorData::invalid_params(
                "the title must not be empty",
                None,
            ));
        }
        let id = self.store.with(|(next, notes)| {
            *next += 1;
            notes.insert(
                *next,
                Note {
                    title: args.title.trim().to_owned(),
                    body: args.body,
                    tags: args.tags.unwrap_or_default(),
                    created: jiff::Timestamp::now(),
                },
            );
            *next
        });
        Ok(text(format!("added note #{id}")))
    }

    #[tool(description = "List notes (newest last), optionally only those with a tag")]
    async fn list_notes(
        &self,
        Parameters(args): Parameters<ListNotesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let lines: Vec<String> = self.store.with(|(_, notes)| {
            notes
                .iter()
                .filter(|(_, n)| args.tag.as_ref().is_none_or(|t| n.tags.contains(t)))
                .map(|(id, n)| render_note(*id, n))
                .collect()
        });
        Ok(text(if lines.is_empty() {
            "no notes yet".to_owned()
        } else {
            lines.join("\n\n")
        }))
    }

    #[tool(description = "Search notes by text in the title or body")]
    async fn search_notes(
        &self,
        Parameters(args): Parameters<SearchNotesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = args.query.to_lowercase();
        let lines: Vec<String> = self.store.with(|(_, notes)| {
            notes
                .iter()
                .filter(|(_, n)| {
                    n.title.to_lowercase().contains(&query)
                        || n.body.to_lowercase().contains(&query)
                })
                .map(|(id, n)| render_note(*id, n))
                .collect()
        });
        Ok(text(if lines.is_empty() {
            format!("no note mentions `{}`", args.query)
        } else {
            lines.join("\n\n")
        }))
    }

    #[tool(description = "Delete a note by number")]
    async fn delete_note(
        &self,
        Parameters(args): Parameters<DeleteNoteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.store.with(|(_, notes)| notes.remove(&args.id)) {
            Some(note) => Ok(text(format!("deleted note #{} ({})", args.id, note.title))),
            None => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "there is no note #{}",
                args.id
            ))])),
        }
    }
}

#[prompt_router]
impl NotesServer {
    /// Asks for a summary of the notes.
    #[prompt(
        name = "summarize_notes",
        description = "Summarize the stored notes, optionally those with one tag"
    )]
    async fn summarize_notes(
        &self,
        Parameters(args): Parameters<SummarizeArgs>,
    ) -> Vec<PromptMessage> {
        let notes: Vec<String> = self.store.with(|(_, notes)| {
            notes
                .iter()
                .filter(|(_, n)| args.tag.as_ref().is_none_or(|t| n.tags.contains(t)))
                .map(|(id, n)| render_note(*id, n))
                .collect()
        });
        vec![PromptMessage::new_text(
            Role::User,
            format!(
                "Summarize these notes in a few bullet points, grouping related ones:\n\n{}",
                if notes.is_empty() {
                    "(no notes yet)".to_owned()
                } else {
                    notes.join("\n\n")
                }
            ),
        )]
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for NotesServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("demo-notes", env!("CARGO_PKG_VERSION")))
        .with_instructions("An in-memory notes store: add, list, search and delete notes.")
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all = Resource::new("notes://all", "all-notes")
            .with_description("Every note as Markdown")
            .with_mime_type("text/markdown");
        Ok(ListResourcesResult::with_all_items(vec![all]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let one = ResourceTemplate::new("notes://note/{id}", "note")
            .with_description("One note by number")
            .with_mime_type("text/markdown");
        Ok(ListResourceTemplatesResult::with_all_items(vec![one]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let body = if uri == "notes://all" {
            let all: Vec<String> = self
                .store
                .with(|(_, notes)| notes.iter().map(|(id, n)| render_note(*id, n)).collect());
            Some(if all.is_empty() {
                "(no notes yet)".to_owned()
            } else {
                all.join("\n\n")
            })
        } else {
            uri.strip_prefix("notes://note/")
                .and_then(|id| id.parse::<u64>().ok())
                .and_then(|id| {
                    self.store
                        .with(|(_, notes)| notes.get(&id).map(|n| render_note(id, n)))
                })
        };
        match body {
            Some(body) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(body, uri).with_mime_type("text/markdown"),
            ])
            .into()),
            None => Err(ErrorData::resource_not_found(
                format!("no resource {uri}"),
                None,
            )),
        }
    }
}
