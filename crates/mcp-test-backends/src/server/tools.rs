//! The tool list and `tools/call` dispatch.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use super::{SessionLogLevel, Shared, Touched, ask, sample, slow, tasks};
use crate::{counters::CallGuard, spec::BackendSpec};

/// `echo {text}`.
pub(crate) const ECHO: &str = "echo";
/// `add {a, b}`.
pub(crate) const ADD: &str = "add";
/// `get-sum {a, b}`: `add` under a name containing `-`.
pub(crate) const GET_SUM: &str = "get-sum";
/// `fail`: an `isError` result.
pub(crate) const FAIL: &str = "fail";
/// `slow {steps, delay_ms}`.
pub(crate) const SLOW: &str = "slow";
/// `ask`: two elicitation rounds.
pub(crate) const ASK: &str = "ask";
/// `headers`: the HTTP headers of this call.
pub(crate) const HEADERS: &str = "headers";
/// `sample {prompt}`: a sampling request to a 2025 client (only with
/// [`BackendSpec::sampling_tool`]).
pub(crate) const SAMPLE: &str = "sample";
/// `touch {uri?}`: change notifications (only with [`BackendSpec::touch_tool`]).
pub(crate) const TOUCH: &str = "touch";
/// `long_task {delay_ms}`: a task when the request declares the tasks extension (only with
/// [`BackendSpec::tasks`]).
pub(crate) const LONG_TASK: &str = "long_task";

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => Arc::default(),
    }
}

fn two_numbers() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
        "required": ["a", "b"]
    }))
}

fn sum_output() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": { "sum": { "type": "number" } },
        "required": ["sum"]
    }))
}

fn no_arguments() -> Arc<JsonObject> {
    schema(json!({ "type": "object", "properties": {} }))
}

/// Name of extra tool `index` of `count`: `tool_00` … `tool_99`, wider past 100.
pub(crate) fn extra_tool_name(index: usize, count: usize) -> String {
    let width = count.saturating_sub(1).to_string().len().max(2);
    format!("tool_{index:0width$}")
}

/// Every tool, in a fixed order: the fixed tools, `touch` and `long_task` when enabled, then the
/// extra ones.
pub(crate) fn all(spec: &BackendSpec) -> Vec<Tool> {
    let text_input = schema(json!({
        "type": "object",
        "properties": { "text": { "type": "string" } },
        "required": ["text"]
    }));
    let mut tools = vec![
        Tool::new(
            ECHO,
            "Echoes `text` back, prefixed by the backend name",
            text_input,
        ),
        Tool::new(ADD, "Adds `a` and `b`", two_numbers()).with_raw_output_schema(sum_output()),
        Tool::new(
            GET_SUM,
            "Adds `a` and `b` (a name with a dash)",
            two_numbers(),
        )
        .with_raw_output_schema(sum_output()),
        Tool::new(
            FAIL,
            "Always returns a tool error (isError: true)",
            no_arguments(),
        ),
        Tool::new(
            SLOW,
            "Sends progress (and log) notifications for `steps` steps, `delay_ms` apart, progress messages filled to `pad` bytes",
            schema(json!({
                "type": "object",
                "properties": {
                    "steps": { "type": "integer", "minimum": 0 },
                    "delay_ms": { "type": "integer", "minimum": 0 },
                    "pad": { "type": "integer", "minimum": 0 }
                }
            })),
        ),
        Tool::new(
            ASK,
            "Asks the user's name, then a colour (elicitation)",
            no_arguments(),
        ),
        Tool::new(
            HEADERS,
            "Returns the HTTP headers this call arrived with",
            no_arguments(),
        ),
    ];
    if spec.touch_tool {
        tools.push(Tool::new(
            TOUCH,
            "Sends notifications/resources/updated for `uri` (when given) to its subscribers, \
             then resources/list_changed and tools/list_changed",
            schema(json!({
                "type": "object",
                "properties": { "uri": { "type": "string" } }
            })),
        ));
    }
    if spec.tasks {
        tools.push(Tool::new(
            LONG_TASK,
            "Waits `delay_ms`, then answers `task done`; runs as a task (tasks extension) when \
             the request declares the extension",
            schema(json!({
                "type": "object",
                "properties": { "delay_ms": { "type": "integer", "minimum": 0 } }
            })),
        ));
    }
    if spec.sampling_tool {
        tools.push(Tool::new(
            SAMPLE,
            "Asks the client for a sampling completion of `prompt` (2025 sessions)",
            schema(json!({
                "type": "object",
                "properties": { "prompt": { "type": "string" } }
            })),
        ));
    }
    let optional_text = schema(json!({
        "type": "object",
        "properties": { "text": { "type": "string" } }
    }));
    tools.extend((0..spec.extra_tools).map(|index| {
        Tool::new(
            extra_tool_name(index, spec.extra_tools),
            "An extra echo tool",
            optional_text.clone(),
        )
    }));
    tools
}

/// A successful result whose only text is `<backend>: <text>`.
pub(crate) fn text_result(backend: &str, text: impl std::fmt::Display) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!("{backend}: {text}"))])
}

pub(crate) async fn call(
    shared: &Arc<Shared>,
    log_level: &SessionLogLevel,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.to_string();
    let guard = CallGuard::start(shared.counters.clone(), &name);
    let backend = shared.spec.name.as_str();
    let arguments = request.arguments.clone().unwrap_or_default();
    let result = match name.as_str() {
        ECHO => {
            let text = string_argument(&arguments, "text")?;
            Ok(text_result(backend, text).into())
        }
        ADD | GET_SUM => {
            let sum = sum(&arguments)?;
            let mut result = CallToolResult::structured(json!({ "sum": sum }));
            result.content = vec![ContentBlock::text(format!("{backend}: {sum}"))];
            Ok(result.into())
        }
        FAIL => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "{backend}: failed on purpose"
        ))])
        .into()),
        SLOW => {
            // Cancellation returns early and leaves the guard unfinished: it counts as cancelled.
            return slow::run(shared, log_level, &arguments, &context)
                .await
                .map(|result| {
                    guard.finish();
                    result.into()
                });
        }
        ASK => ask::run(shared, &request, &context).await,
        HEADERS => Ok(headers_result(backend, &context).into()),
        TOUCH if shared.spec.touch_tool => {
            let uri = match arguments.get("uri") {
                None | Some(Value::Null) => None,
                Some(Value::String(uri)) => Some(uri.as_str()),
                Some(_) => {
                    return Err(ErrorData::invalid_params("`uri` must be a string", None));
                }
            };
            let touched = shared.listeners.touch(uri).await;
            Ok(touch_result(backend, uri, touched).into())
        }
        SAMPLE if shared.spec.sampling_tool => sample::run(backend, &request, &context).await,
        LONG_TASK if shared.spec.tasks => {
            return tasks::long_task(shared, &arguments, &context, guard).await;
        }
        _ if is_extra_tool(&shared.spec, &name) => {
            let text = arguments.get("text").and_then(Value::as_str).unwrap_or("");
            Ok(text_result(backend, format!("{name} {text}").trim_end()).into())
        }
        _ => Err(ErrorData::invalid_params(
            format!("unknown tool: {name}"),
            None,
        )),
    };
    guard.finish();
    result
}

fn is_extra_tool(spec: &BackendSpec, name: &str) -> bool {
    (0..spec.extra_tools).any(|index| extra_tool_name(index, spec.extra_tools) == name)
}

fn string_argument<'a>(arguments: &'a JsonObject, key: &str) -> Result<&'a str, ErrorData> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("missing string argument `{key}`"), None))
}

/// `a + b`, as an integer when both are integers.
fn sum(arguments: &JsonObject) -> Result<Value, ErrorData> {
    let number = |key: &str| {
        arguments
            .get(key)
            .filter(|value| value.is_number())
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("missing number argument `{key}`"), None)
            })
    };
    let (a, b) = (number("a")?, number("b")?);
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64())
        && let Some(sum) = a.checked_add(b)
    {
        return Ok(json!(sum));
    }
    let (a, b) = (
        a.as_f64().unwrap_or_default(),
        b.as_f64().unwrap_or_default(),
    );
    Ok(json!(a + b))
}

/// What `touch` reached: text `<backend>: touched [<uri>]`, and the counts in
/// `structuredContent` (`subscriptions`: open `subscriptions/listen` streams notified, `sessions`:
/// legacy sessions notified).
fn touch_result(backend: &str, uri: Option<&str>, touched: Touched) -> CallToolResult {
    let mut result = CallToolResult::structured(json!({
        "subscriptions": touched.subscriptions,
        "sessions": touched.sessions,
    }));
    let text = match uri {
        Some(uri) => format!("{backend}: touched {uri}"),
        None => format!("{backend}: touched"),
    };
    result.content = vec![ContentBlock::text(text)];
    result
}

/// The call's HTTP headers as `{lowercased name: value}` (repeated headers joined by `, `), in
/// `structuredContent.headers` and as `<backend>: <json>` text.
fn headers_result(backend: &str, context: &RequestContext<RoleServer>) -> CallToolResult {
    let mut headers = serde_json::Map::new();
    if let Some(parts) = context.extensions.get::<http::request::Parts>() {
        for name in parts.headers.keys() {
            let values: Vec<String> = parts
                .headers
                .get_all(name)
                .iter()
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
                .collect();
            headers.insert(name.as_str().to_owned(), Value::String(values.join(", ")));
        }
    }
    let headers = Value::Object(headers);
    let mut result = CallToolResult::structured(json!({ "headers": headers }));
    result.content = vec![ContentBlock::text(format!("{backend}: {headers}"))];
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_tool_names_are_zero_padded() {
        assert_eq!(extra_tool_name(0, 5), "tool_00");
        assert_eq!(extra_tool_name(7, 12), "tool_07");
        assert_eq!(extra_tool_name(5, 150), "tool_005");
    }

    #[test]
    fn tool_names_are_unique() {
        let tools = all(&BackendSpec::modern("b").extra_tools(12));
        let mut names: Vec<_> = tools.iter().map(|tool| tool.name.to_string()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 7 + 12);
    }

    #[test]
    fn touch_is_listed_only_when_enabled() {
        let listed = |spec: &BackendSpec| all(spec).iter().any(|tool| tool.name == TOUCH);
        assert!(!listed(&BackendSpec::modern("b")));
        let spec = BackendSpec::modern("b").touch_tool(true).extra_tools(1);
        assert!(listed(&spec));
        let names: Vec<String> = all(&spec).iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names[7..], ["touch", "tool_00"]);
    }

    #[test]
    fn long_task_is_listed_only_with_tasks() {
        let listed = |spec: &BackendSpec| all(spec).iter().any(|tool| tool.name == LONG_TASK);
        assert!(!listed(&BackendSpec::modern("b")));
        assert!(!listed(&BackendSpec::both("b").touch_tool(true)));
        let spec = BackendSpec::both("b")
            .touch_tool(true)
            .tasks(true)
            .extra_tools(1);
        let names: Vec<String> = all(&spec).iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names[7..], ["touch", "long_task", "tool_00"]);
    }

    #[test]
    fn sums_keep_integers() {
        let arguments = |a: Value, b: Value| {
            let mut object = JsonObject::new();
            object.insert("a".into(), a);
            object.insert("b".into(), b);
            object
        };
        assert_eq!(sum(&arguments(json!(2), json!(3))).expect("sum"), json!(5));
        assert_eq!(
            sum(&arguments(json!(1.5), json!(2))).expect("sum"),
            json!(3.5)
        );
        assert!(sum(&arguments(json!("1"), json!(2))).is_err());
    }
}
