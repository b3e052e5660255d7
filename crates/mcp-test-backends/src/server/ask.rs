//! `ask`: asks the user's name, then a colour, then answers `<backend>: <name> likes <color>`.
//!
//! Modern requests get MRTR (`input_required` results carrying an HMAC-sealed `requestState`);
//! legacy sessions get two real `elicitation/create` requests on the call's SSE stream.

use std::{
    hash::{BuildHasher, Hasher},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        ElicitRequest, ElicitRequestParams, ElicitationAction, InputRequest, InputRequests,
        InputRequiredResult, RequestStateCodec, SealOptions,
    },
    service::RequestContext,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Shared, is_modern, tools::text_result};

const NAME: &str = "name";
const COLOR: &str = "color";
const STATE_TTL: Duration = Duration::from_secs(300);

/// Seals and opens `ask`'s `requestState` with a random per-backend key.
pub(crate) struct AskCodec {
    codec: RequestStateCodec,
}

impl std::fmt::Debug for AskCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AskCodec")
    }
}

impl AskCodec {
    pub(crate) fn new() -> Self {
        let codec = RequestStateCodec::try_new(random_key())
            .expect("a 32-byte key is long enough for RequestStateCodec");
        Self { codec }
    }
}

/// 32 bytes from std's randomly seeded hasher: unguessable enough for a test backend, and no
/// extra dependency.
fn random_key() -> Vec<u8> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    (0..4u64)
        .flat_map(|index| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(index);
            hasher.write_u128(nanos);
            hasher.finish().to_le_bytes()
        })
        .collect()
}

/// What the sealed `requestState` carries between rounds.
#[derive(Debug, Serialize, Deserialize)]
struct AskState {
    /// The key being asked for: `name` or `color`.
    asking: String,
    /// The name, once answered.
    name: Option<String>,
}

pub(crate) async fn run(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if is_modern(context) {
        modern(shared, request, context)
    } else {
        legacy(shared, context).await
    }
}

fn elicitation_params(backend: &str, key: &str) -> ElicitRequestParams {
    serde_json::from_value(json!({
        "mode": "form",
        "message": format!("{backend} asks for your {key}"),
        "requestedSchema": {
            "type": "object",
            "properties": { key: { "type": "string" } },
            "required": [key]
        }
    }))
    .expect("a form elicitation with one string property is valid")
}

/// The state's associated data: a state sealed for another backend or tool does not open here.
fn associated_data(backend: &str) -> Vec<u8> {
    format!("{backend}|tools/call|ask").into_bytes()
}

fn modern(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let backend = shared.spec.name.as_str();
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some());
    if !declared {
        return Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_elicitation().build(),
        ));
    }
    let associated = associated_data(backend);
    let seal = |state: &AskState| {
        shared
            .ask
            .codec
            .seal_json_with(
                state,
                &SealOptions::new()
                    .associated_data(&associated)
                    .ttl(STATE_TTL),
            )
            .map_err(|error| ErrorData::internal_error(format!("ask: {error}"), None))
    };
    let input_required = |state: &AskState| -> Result<CallToolResponse, ErrorData> {
        let mut requests = InputRequests::new();
        requests.insert(
            state.asking.clone(),
            InputRequest::Elicitation(ElicitRequest::new(elicitation_params(
                backend,
                &state.asking,
            ))),
        );
        Ok(InputRequiredResult::new(Some(requests), Some(seal(state)?)).into())
    };

    let Some(sealed) = request.request_state.as_deref() else {
        if request.input_responses.is_some() {
            return Err(ErrorData::invalid_params(
                "ask: inputResponses without requestState",
                None,
            ));
        }
        return input_required(&AskState {
            asking: NAME.to_owned(),
            name: None,
        });
    };
    let state: AskState = shared
        .ask
        .codec
        .open_json_with(sealed, &associated)
        .map_err(|error| {
            ErrorData::invalid_params(format!("ask: invalid requestState: {error}"), None)
        })?;
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(&state.asking));
    let Some(answer) = answer else {
        // Missing input: ask again for the same key (spec: SHOULD NOT be an error).
        return input_required(&state);
    };
    let Some(value) = accepted_value(answer, &state.asking) else {
        return Ok(declined(backend).into());
    };
    match (state.asking.as_str(), state.name) {
        (NAME, _) => input_required(&AskState {
            asking: COLOR.to_owned(),
            name: Some(value),
        }),
        (COLOR, Some(name)) => Ok(text_result(backend, format!("{name} likes {value}")).into()),
        _ => Err(ErrorData::invalid_params("ask: invalid requestState", None)),
    }
}

/// `content.<key>` of an accepted `ElicitResult` JSON.
fn accepted_value(answer: &Value, key: &str) -> Option<String> {
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    answer.get("content")?.get(key)?.as_str().map(str::to_owned)
}

fn declined(backend: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{backend}: ask was declined"
    ))])
}

async fn legacy(
    shared: &Shared,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let backend = shared.spec.name.as_str();
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some());
    if !declared {
        return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "{backend}: ask needs a client that declares elicitation"
        ))])
        .into());
    }
    let mut answers = Vec::with_capacity(2);
    for key in [NAME, COLOR] {
        let result = context
            .peer
            .create_elicitation(elicitation_params(backend, key))
            .await
            .map_err(|error| {
                ErrorData::internal_error(format!("ask: elicitation/create failed: {error}"), None)
            })?;
        let value = (result.action == ElicitationAction::Accept)
            .then_some(result.content)
            .flatten()
            .and_then(|content| content.get(key)?.as_str().map(str::to_owned));
        match value {
            Some(value) => answers.push(value),
            None => return Ok(declined(backend).into()),
        }
    }
    Ok(text_result(backend, format!("{} likes {}", answers[0], answers[1])).into())
}
