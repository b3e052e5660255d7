//! `sample {prompt}`: asks the client for one sampling completion and answers
//! `<backend>: sampled <text of the client's answer>`.
//!
//! 2025 sessions get a real `sampling/createMessage` request on the call's stream; 2026-07-28
//! requests get MRTR: an `input_required` result whose `inputRequests.sample` is the same request
//! (no `requestState`: the retry's `inputResponses.sample` is all the tool needs), and a client
//! that did not declare sampling gets `-32021`. Sampling is deprecated by SEP-2577 but still part
//! of the revisions this tool tests.

#![allow(deprecated)]

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult, InputRequest,
        InputRequests, InputRequiredResult, SamplingMessage,
    },
    service::RequestContext,
};
use serde_json::Value;

use super::{is_modern, tools::text_result};

/// The tool's key in `inputRequests` / `inputResponses`.
const INPUT_KEY: &str = "sample";

pub(crate) async fn run(
    backend: &str,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let prompt = request
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get("prompt"))
        .and_then(Value::as_str)
        .unwrap_or("hello");
    let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 64);
    if is_modern(context) {
        return modern(backend, request, context, params);
    }
    match context.peer.create_message(params).await {
        Ok(result) => Ok(sampled(backend, &result).into()),
        Err(error) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "{backend}: sampling failed: {error}"
        ))])
        .into()),
    }
}

fn modern(
    backend: &str,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    params: CreateMessageRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    if let Some(answer) = request
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(INPUT_KEY))
    {
        let result: CreateMessageResult = serde_json::from_value(answer.clone()).map_err(|e| {
            ErrorData::invalid_params(format!("sample: invalid inputResponses.sample: {e}"), None)
        })?;
        return Ok(sampled(backend, &result).into());
    }
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.sampling.is_some());
    if !declared {
        return Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_sampling().build(),
        ));
    }
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.to_owned(),
        InputRequest::CreateMessage(CreateMessageRequest::new(params)),
    );
    Ok(InputRequiredResult::new(Some(requests), None).into())
}

fn sampled(backend: &str, result: &CreateMessageResult) -> CallToolResult {
    let text = result
        .message
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    text_result(backend, format!("sampled {text}"))
}
