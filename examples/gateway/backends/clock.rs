//! The `clock` demo backend.

use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, Implementation, ListResourcesResult, PaginatedRequestParams, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, prompt, prompt_handler, prompt_router, schemars, tool,
    tool_handler, tool_router,
};
use serde::Deserialize;

use super::text;

/// Tells the time in IANA time zones and converts between them.
#[derive(Clone)]
pub(crate) struct ClockServer {
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

#[tool_router]
impl ClockServer {
    pub(crate) fn new() -> Self {
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
