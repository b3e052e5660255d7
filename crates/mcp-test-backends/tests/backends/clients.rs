//! rmcp clients pinned to an era, and a client handler that records what the server sends.

// Logging is deprecated by SEP-2577, but the backends still send log messages to observe.
#![allow(deprecated)]

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use http::{HeaderName, HeaderValue};
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient,
    model::{
        ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
        Implementation, LoggingMessageNotificationParam, ProgressNotificationParam,
        ProtocolVersion, ResourceUpdatedNotificationParam,
    },
    service::{ClientInitializeError, NotificationContext, RequestContext, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::json;

pub(crate) type Client = RunningService<RoleClient, RecordingClient>;

/// Records progress, log and change notifications (the latter outside `subscriptions/listen`
/// streams, i.e. on legacy GET streams); answers elicitations `name` → `Ferris`, `color` →
/// `orange`.
#[derive(Clone)]
pub(crate) struct RecordingClient {
    version: ProtocolVersion,
    pub(crate) progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    pub(crate) logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    pub(crate) elicitations: Arc<Mutex<Vec<String>>>,
    /// `tools/list_changed`, `resources/list_changed`, `resources/updated <uri>`, in arrival order.
    pub(crate) changes: Arc<Mutex<Vec<String>>>,
}

impl RecordingClient {
    pub(crate) fn new(version: ProtocolVersion) -> Self {
        Self {
            version,
            progress: Arc::default(),
            logs: Arc::default(),
            elicitations: Arc::default(),
            changes: Arc::default(),
        }
    }

    pub(crate) fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.progress.lock().expect("progress lock").clone()
    }

    pub(crate) fn logs(&self) -> Vec<LoggingMessageNotificationParam> {
        self.logs.lock().expect("logs lock").clone()
    }

    pub(crate) fn changes(&self) -> Vec<String> {
        self.changes.lock().expect("changes lock").clone()
    }

    fn record_change(&self, change: String) {
        self.changes.lock().expect("changes lock").push(change);
    }
}

impl ClientHandler for RecordingClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("backend-tests", "0.0.0"),
        )
        .with_protocol_version(self.version.clone())
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("progress lock").push(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().expect("logs lock").push(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.record_change("tools/list_changed".to_owned());
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.record_change("resources/list_changed".to_owned());
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.record_change(format!("resources/updated {}", params.uri));
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let schema = serde_json::to_value(&request).expect("serializable elicitation");
        let properties = &schema["requestedSchema"]["properties"];
        let (key, answer) = if properties.get("name").is_some() {
            ("name", "Ferris")
        } else {
            ("color", "orange")
        };
        self.elicitations
            .lock()
            .expect("elicitations lock")
            .push(key.to_owned());
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({ key: answer })))
    }
}

/// Transport configuration for `url`, sending `headers` on every request.
fn config(url: &str, headers: &[(&str, &str)]) -> StreamableHttpClientTransportConfig {
    let headers: HashMap<HeaderName, HeaderValue> = headers
        .iter()
        .map(|(name, value)| {
            (
                HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                HeaderValue::from_str(value).expect("header value"),
            )
        })
        .collect();
    StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(headers)
}

/// A 2026-07-28 client (`server/discover`, then stateless requests).
pub(crate) async fn modern(url: &str) -> (Client, RecordingClient) {
    modern_with_headers(url, &[]).await
}

pub(crate) async fn modern_with_headers(
    url: &str,
    headers: &[(&str, &str)],
) -> (Client, RecordingClient) {
    let handler = RecordingClient::new(ProtocolVersion::V_2026_07_28);
    let client = handler
        .clone()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config(url, headers)),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("modern client should start");
    (client, handler)
}

/// A 2025-11-25 client (`initialize` + session).
pub(crate) async fn legacy(url: &str) -> Result<(Client, RecordingClient), ClientInitializeError> {
    let handler = RecordingClient::new(ProtocolVersion::V_2025_11_25);
    let client = handler
        .clone()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config(url, &[])),
            ClientLifecycleMode::Initialize,
        )
        .await?;
    Ok((client, handler))
}

/// rmcp's auto mode: probe with `server/discover`, fall back to `initialize`.
pub(crate) async fn auto(url: &str) -> (Client, RecordingClient) {
    let handler = RecordingClient::new(ProtocolVersion::V_2026_07_28);
    let client = handler
        .clone()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config(url, &[])),
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
        )
        .await
        .expect("auto client should start");
    (client, handler)
}

/// The version the client ended up speaking.
pub(crate) fn negotiated_version(client: &Client) -> String {
    client
        .peer_info()
        .expect("peer info after startup")
        .protocol_version
        .to_string()
}
