"""The conformance backend: an MCP server on the Python SDK 2.x (`MCPServer`) that implements every
tool, resource and prompt the official conformance suite (`@modelcontextprotocol/conformance`)
expects of a server under test, in both protocol eras (2025 sessions and stateless 2026-07-28).

    python backend.py PORT [--legacy-only | --modern-only] [--server-requests]

Run by `cargo xtask conformance` with `.venv/mcp2/bin/python`, once behind the gateway (a
single-backend virtual host with `naming = "auto"`, so the names stay as the suite expects) and
once on its own, so that a failure can be blamed on the gateway or on this backend. With `--legacy-only` it
refuses 2026-07-28 requests (HTTP 400, -32600) like a 2025-only server, so the gateway talks to it
in 2025 sessions; with `--modern-only` it refuses 2025 requests (HTTP 400, -32022 naming 2026-07-28)
like a 2026-07-28-only server, so the gateway bridges 2025 clients to it.

With `--server-requests` its sampling and elicitation tools ask the 2025 way in every era, with a
server-initiated request inside the call, as a server written for 2025 does: in a 2025 session
that works, in 2026-07-28 such a call fails (there is no back-channel for it). That is the backend
of the gateway's era-per-caller cell: a 2025 client must reach it in a 2025 session.

The 2025 era gets real server-to-client requests (sampling, elicitation) and notifications
(logging, progress, resources/updated); the 2026-07-28 era gets input-required results (MRTR)
whose `requestState` the SDK seals, so a tampered state is rejected here, not trusted.
"""

import base64
import json
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, UserMessage
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import (
    AudioContent,
    CallToolResult,
    Completion,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

# 1x1 PNG and a minimal WAV, as the suite's own example servers send them.
IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
MODERN = "2026-07-28"
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

server = MCPServer(name="conformance-backend", version="1.0.0")
# Per legacy session (keyed by the session object): the level set by logging/setLevel, and the
# sessions subscribed to each resource URI.
log_levels: dict[int, str] = {}
subscribers: dict[str, dict[int, Any]] = {}


def text(value: str, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=value)], is_error=is_error)


def modern(ctx: Context) -> bool:
    return ctx.request_context.session.protocol_version == MODERN


# `--server-requests`: sampling and elicitation never answer with input-required results.
SERVER_REQUESTS = "--server-requests" in sys.argv[2:]


def input_required_era(ctx: Context) -> bool:
    """Whether a sampling or elicitation tool asks with an input-required result (2026-07-28,
    unless `--server-requests`) rather than a server-initiated request."""
    return modern(ctx) and not SERVER_REQUESTS


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def response(ctx: Context, key: str) -> dict[str, Any] | None:
    """The client's answer to input request `key`, as it was on the wire."""
    answer = (ctx.input_responses or {}).get(key)
    if answer is None:
        return None
    return answer.model_dump(mode="json", by_alias=True, exclude_none=True)


def elicit_request(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


def sampling_request(prompt: str, max_tokens: int = 100) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    return {"method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": max_tokens}}


ROOTS_REQUEST = {"method": "roots/list"}


def input_required(requests: dict[str, Any], state: dict[str, Any] | None = None) -> InputRequiredResult:
    payload: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        payload["requestState"] = compact(state)
    return InputRequiredResult.model_validate(payload)


# --- content tools -----------------------------------------------------------------------------


@server.tool(name="test_simple_text", description="Returns simple text content")
def simple_text() -> CallToolResult:
    return text("This is a simple text response for testing.")


@server.tool(name="test_image_content", description="Returns image content")
def image_content() -> CallToolResult:
    return CallToolResult(content=[ImageContent(type="image", data=IMAGE, mime_type="image/png")])


@server.tool(name="test_audio_content", description="Returns audio content")
def audio_content() -> CallToolResult:
    return CallToolResult(content=[AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")])


def embedded(uri: str, value: str, mime_type: str = "text/plain") -> EmbeddedResource:
    contents = TextResourceContents(uri=uri, mime_type=mime_type, text=value)
    return EmbeddedResource(type="resource", resource=contents)


@server.tool(name="test_embedded_resource", description="Returns an embedded resource")
def embedded_resource() -> CallToolResult:
    return CallToolResult(
        content=[embedded("test://embedded-resource", "This is an embedded resource content.")]
    )


@server.tool(name="test_multiple_content_types", description="Returns text, image and a resource")
def multiple_content_types() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=IMAGE, mime_type="image/png"),
            embedded("test://mixed-content-resource", compact({"test": "data", "value": 123}), "application/json"),
        ]
    )


@server.tool(name="test_error_handling", description="Always fails with a tool error")
def error_handling() -> CallToolResult:
    return text("This tool intentionally returns an error for testing", is_error=True)


# --- notifications -----------------------------------------------------------------------------


@server.tool(name="test_tool_with_logging", description="Sends log notifications while running")
async def tool_with_logging(ctx: Context) -> CallToolResult:
    threshold = log_levels.get(id(ctx.request_context.session), "debug")
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        if LEVELS.index("info") >= LEVELS.index(threshold):
            await ctx.info(message)
        await anyio.sleep(0.05)
    return text("Tool with logging executed successfully")


@server.tool(name="test_tool_with_progress", description="Sends progress notifications while running")
async def tool_with_progress(ctx: Context) -> CallToolResult:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        await anyio.sleep(0.05)
    return text("Progress completed")


@server.tool(name="test_missing_capability", description="Needs the client's sampling capability")
def missing_capability(ctx: Context) -> CallToolResult:
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=-32021,
            message="Missing required client capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return text("sampling capability declared")


def changed_tool() -> CallToolResult:
    return text("added")


def changed_prompt() -> str:
    return "added"


@server.tool(name="test_trigger_tool_change", description="Adds or removes a tool (tools list_changed)")
async def trigger_tool_change(ctx: Context) -> CallToolResult:
    try:
        server.remove_tool("test_added_tool")
    except Exception:
        server.add_tool(changed_tool, name="test_added_tool", description="Added by test_trigger_tool_change")
    await ctx.notify_tools_changed()
    return text("tool list changed")


@server.tool(name="test_trigger_prompt_change", description="Adds or removes a prompt (prompts list_changed)")
async def trigger_prompt_change(ctx: Context) -> CallToolResult:
    try:
        server.remove_prompt("test_added_prompt")
    except Exception:
        server.add_prompt(
            Prompt.from_function(changed_prompt, name="test_added_prompt", description="Added by test_trigger_prompt_change")
        )
    await ctx.notify_prompts_changed()
    return text("prompt list changed")


# --- sampling and elicitation (2025: real requests; 2026-07-28: input-required results) ----------


@server.tool(name="test_sampling", description="Asks the client's LLM for a completion")
async def sampling(prompt: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    if input_required_era(ctx):
        return await input_sampling(ctx)
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = getattr(result, "content", None)
    return text(f"LLM response: {getattr(content, 'text', None) or 'No response'}")


class Answer(BaseModel):
    response: str = Field(description="User's response")


class Defaults(BaseModel):
    name: str = "John Doe"
    age: int = 30
    score: float = 95.5
    status: str = Field(default="active", json_schema_extra={"enum": ["active", "inactive", "pending"]})
    verified: bool = True


class Enums(BaseModel):
    untitledSingle: str = Field(json_schema_extra={"enum": ["option1", "option2", "option3"]})
    titledSingle: str = Field(
        json_schema_extra={
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]
        }
    )
    legacyEnum: str = Field(
        json_schema_extra={"enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]}
    )
    untitledMulti: list[str] = Field(
        min_length=1, max_length=3, json_schema_extra={"items": {"type": "string", "enum": ["option1", "option2", "option3"]}}
    )
    titledMulti: list[str] = Field(
        min_length=1,
        max_length=3,
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            }
        },
    )


async def elicit(ctx: Context, key: str, message: str, model: type[BaseModel], label: str) -> Any:
    if input_required_era(ctx):
        answer = response(ctx, key)
        if answer is not None:
            return text(f"{label}: action={answer.get('action')}, content={compact(answer.get('content') or {})}")
        schema = model.model_json_schema()
        return input_required({key: elicit_request(message, schema["properties"], schema.get("required", []))})
    result = await ctx.elicit(message, model)
    content = result.data.model_dump(mode="json") if getattr(result, "data", None) is not None else {}
    return text(f"{label}: action={result.action}, content={compact(content)}")


@server.tool(name="test_elicitation", description="Asks the user for input")
async def elicitation(message: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    return await elicit(ctx, "user_response", message, Answer, "User response")


@server.tool(name="test_elicitation_sep1034_defaults", description="Elicitation with defaults (SEP-1034)")
async def elicitation_defaults(ctx: Context) -> CallToolResult | InputRequiredResult:
    message = "Please review and update the form fields with defaults"
    return await elicit(ctx, "defaults", message, Defaults, "Elicitation completed")


@server.tool(name="test_elicitation_sep1330_enums", description="Elicitation with enum schemas (SEP-1330)")
async def elicitation_enums(ctx: Context) -> CallToolResult | InputRequiredResult:
    message = "Please select options from the enum fields"
    return await elicit(ctx, "enum_options", message, Enums, "Elicitation completed")


# --- 2026-07-28 multi-round-trip requests (input-required results) ------------------------------


@server.tool(name="test_input_required_result_elicitation", description="MRTR: asks for a name")
async def input_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = response(ctx, "user_name") or {}
    content = answer.get("content") or {}
    if "name" in content:
        return text(f"Hello, {content['name']}!")
    return input_required({"user_name": elicit_request("What is your name?", {"name": {"type": "string"}}, ["name"])})


@server.tool(name="test_input_required_result_sampling", description="MRTR: asks for an LLM completion")
async def input_sampling(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = response(ctx, "sample_request")
    if answer is not None:
        content = answer.get("content")
        value = content.get("text", "no response") if isinstance(content, dict) else "no response"
        return text(f"Sampling result: {value}")
    return input_required({"sample_request": sampling_request("What is the capital of France?")})


@server.tool(name="test_input_required_result_list_roots", description="MRTR: asks for the client's roots")
async def input_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = response(ctx, "roots_request")
    if answer is not None:
        return text(f"Found {len(answer.get('roots') or [])} root(s)")
    return input_required({"roots_request": ROOTS_REQUEST})


@server.tool(name="test_input_required_result_request_state", description="MRTR: round-trips requestState")
async def input_request_state(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = response(ctx, "confirm") or {}
    if ctx.request_state and (answer.get("content") or {}).get("ok") is True:
        if json.loads(ctx.request_state).get("kind") == "request-state":
            return text("state-ok: requestState validated")
    confirm = elicit_request("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
    return input_required({"confirm": confirm}, {"kind": "request-state"})


@server.tool(name="test_input_required_result_multiple_inputs", description="MRTR: three inputs at once")
async def input_multiple(ctx: Context) -> CallToolResult | InputRequiredResult:
    keys = ("user_name", "greeting", "client_roots")
    if ctx.request_state and all(response(ctx, key) for key in keys):
        return text("Multiple inputs completed")
    return input_required(
        {
            "user_name": elicit_request("What is your name?", {"name": {"type": "string"}}, ["name"]),
            "greeting": sampling_request("Generate a greeting", 50),
            "client_roots": ROOTS_REQUEST,
        },
        {"kind": "multiple-inputs"},
    )


@server.tool(name="test_input_required_result_multi_round", description="MRTR: two rounds")
async def input_multi_round(ctx: Context) -> CallToolResult | InputRequiredResult:
    state = json.loads(ctx.request_state) if ctx.request_state else {}
    if state.get("round") == 2 and response(ctx, "step2"):
        return text("Multi-round complete")
    if state.get("round") == 1 and response(ctx, "step1"):
        step2 = elicit_request("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])
        return input_required({"step2": step2}, {"round": 2})
    step1 = elicit_request("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
    return input_required({"step1": step1}, {"round": 1})


@server.tool(name="test_input_required_result_tampered_state", description="MRTR: state integrity")
async def input_tampered_state(ctx: Context) -> CallToolResult | InputRequiredResult:
    if ctx.request_state and response(ctx, "confirm"):
        return text("integrity-ok: state verified")
    confirm = elicit_request("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
    return input_required({"confirm": confirm}, {"kind": "tamper-test"})


@server.tool(name="test_input_required_result_capabilities", description="MRTR: only declared capabilities")
async def input_capabilities(ctx: Context) -> CallToolResult | InputRequiredResult:
    if ctx.input_responses:
        return text(f"capabilities-ok: received {','.join(ctx.input_responses)}")
    requests: dict[str, Any] = {}
    capabilities = ctx.client_capabilities
    if capabilities and capabilities.elicitation is not None:
        requests["elicit_input"] = elicit_request("Elicitation input", {"value": {"type": "string"}}, ["value"])
    if capabilities and capabilities.sampling is not None:
        requests["sample_input"] = sampling_request("Sample request", 50)
    if not requests:
        return text("No supported capabilities declared")
    return input_required(requests, {"kind": "capabilities-test"})


# --- resources ---------------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text", title="Static Text Resource", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", title="Static Binary Resource", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource for testing"""
    return base64.b64decode(IMAGE)


@server.resource("test://template/{id}/data", name="template", title="Resource Template", mime_type="application/json")
def template(id: str) -> str:
    """A resource template with parameter substitution"""
    return compact({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", name="watched-resource", title="Watched Resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource that can be subscribed to"""
    return "Watched resource content"


# --- prompts -----------------------------------------------------------------------------------


@server.prompt(name="test_simple_prompt", title="Simple Test Prompt", description="A prompt without arguments")
def simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(name="test_prompt_with_arguments", title="Prompt With Arguments", description="Two arguments")
def prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(name="test_prompt_with_embedded_resource", description="A prompt with an embedded resource")
def prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    return [
        UserMessage(content=embedded(resourceUri, "Embedded resource content for testing.")),
        UserMessage(content=TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@server.prompt(name="test_prompt_with_image", description="A prompt with image content")
def prompt_with_image() -> list[Message]:
    return [
        UserMessage(content=ImageContent(type="image", data=IMAGE, mime_type="image/png")),
        UserMessage(content=TextContent(type="text", text="Please analyze the image above.")),
    ]


@server.prompt(name="test_input_required_result_prompt", description="MRTR: a prompt that needs input")
def input_required_prompt(ctx: Context) -> str | InputRequiredResult:
    answer = response(ctx, "user_context") or {}
    content = answer.get("content") or {}
    if "context" in content:
        return f"Prompt with context: {content['context']}"
    question = elicit_request("What context should the prompt use?", {"context": {"type": "string"}}, ["context"])
    return input_required({"user_context": question})


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion:
    values = [v for v in ("paris", "park", "party") if v.startswith(argument.value or "")]
    return Completion(values=values, total=len(values), has_more=False)


# --- legacy-only requests ----------------------------------------------------------------------


async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    log_levels[id(ctx.session)] = params.level
    return EmptyResult()


async def subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
    subscribers.setdefault(str(params.uri), {})[id(ctx.session)] = ctx.session
    return EmptyResult()


async def unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribers.get(str(params.uri), {}).pop(id(ctx.session), None)
    return EmptyResult()


lowlevel = server._lowlevel_server  # the SDK has no public hook for these three
lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


def legacy_only(app: Any) -> Any:
    """An ASGI wrapper that answers a 2026-07-28 request (no session) as the Python SDK 1.x server
    does, 400 with -32600 "Missing session ID", so the gateway's era probe sees a 2025-only server
    and talks to it in 2025 sessions."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if headers.get(b"mcp-protocol-version") == MODERN.encode():
            error = {"code": -32600, "message": "Bad Request: Missing session ID"}
            body = compact({"jsonrpc": "2.0", "id": "server-error", "error": error}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped


def modern_only(app: Any) -> Any:
    """An ASGI wrapper that refuses every 2025 request as a 2026-07-28-only server does: a POST
    without `MCP-Protocol-Version: 2026-07-28` (an `initialize` has none) gets 400 with -32022
    naming the supported revision; GET and DELETE (2025 streams and session ends) get 405."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if scope["method"] in ("GET", "DELETE"):
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["method"] == "POST" and headers.get(b"mcp-protocol-version") != MODERN.encode():
            error = {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": [MODERN]}}
            body = compact({"jsonrpc": "2.0", "id": None, "error": error}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped


def main() -> None:
    """`backend.py PORT [--legacy-only | --modern-only] [--server-requests]`"""
    import uvicorn

    port = int(sys.argv[1])
    # DNS-rebinding protection on (the suite checks it when run directly against this backend).
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
    )
    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=security, host="127.0.0.1")
    if "--legacy-only" in sys.argv[2:]:
        app = legacy_only(app)
    elif "--modern-only" in sys.argv[2:]:
        app = modern_only(app)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
