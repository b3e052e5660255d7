"""An interop-matrix client of `cargo xtask conformance` on the official Python MCP SDK.

    python py_cell.py URL TOKEN MODE PLAN_JSON

`mcp` 1.x: MODE `legacy` (initialize + Mcp-Session-Id). `mcp` 2.x: MODE `auto` (its default
dual-era client: `server/discover` first, 2026-07-28 when the server speaks it) or `legacy`.
Sends `Authorization: Bearer TOKEN` (when not empty), lists every page of tools, then per entry of
PLAN_JSON (`[{"backend", "tool", "arguments", "resource", "prompt", "prompt_arguments"}]`) calls
the tool, reads the resource and gets the prompt; with `progress_tool` (+ `progress_arguments`)
it also calls that tool counting progress notifications, with `complete_prompt`,
`complete_argument` and `complete_value` it asks for completions, with `elicit_tool` it calls a
tool that asks the user (elicitation: answered `name` -> Ferris, `color` -> orange, other required
fields with a plain value; 2026-07-28 input-required rounds are driven by the SDK), with
`sample_tool` a tool that asks for an LLM completion (sampling: answered `sampled by the
matrix`), with `subscribe_resource` it subscribes to that resource (`resources/subscribe` in a
2025 session, `subscriptions/listen` in 2026-07-28), calls `touch_tool` (again on each retry
when `touch_repeat`, and at once when its answer contains `touch_off_text`: a tool that toggles
updates, found on, was switched off) and waits for `notifications/resources/updated` naming it.
Log messages
received during the progress call are counted too. Prints one JSON line: the SDK version, the
negotiated protocol version, the tool names and, per backend and operation, the texts seen or
the error. The xtask judges the line.
"""

import asyncio
import json
import sys
from importlib.metadata import version

import anyio
import mcp

SDK_VERSION = version("mcp")
MAJOR = int(SDK_VERSION.split(".")[0])


def answer_form(schema):
    """Content for an elicitation form: `name` -> Ferris, `color` -> orange, and a plain value of
    the right type for every other required property."""
    properties = schema.get("properties") or {}
    wanted = set(schema.get("required") or []) | ({"name", "color"} & set(properties))
    content = {}
    for key in wanted:
        spec = properties.get(key) or {}
        if key == "name":
            content[key] = "Ferris"
        elif key == "color":
            content[key] = "orange"
        elif spec.get("enum"):
            content[key] = spec["enum"][0]
        elif spec.get("type") == "boolean":
            content[key] = True
        elif spec.get("type") in ("integer", "number"):
            content[key] = max(1, spec.get("minimum", 1))
        else:
            content[key] = "x"
    return content


async def on_elicit(context, params):
    schema = params.model_dump(mode="json", by_alias=True).get("requestedSchema") or {}
    return mcp.types.ElicitResult(action="accept", content=answer_form(schema))


async def on_sample(context, params):
    return mcp.types.CreateMessageResult(
        role="assistant", content=mcp.types.TextContent(type="text", text="sampled by the matrix"), model="matrix"
    )


LOGS = []


async def on_log(params):
    LOGS.append(params)


UPDATES = []
"""The URIs of the notifications/resources/updated received, in order."""


async def on_message(message):
    root = getattr(message, "root", message)
    if getattr(root, "method", None) == "notifications/resources/updated":
        UPDATES.append(str(root.params.uri))


async def touch_until_updated(entry, call_tool):
    """Touches and waits up to 4 s per attempt (3 attempts) for an update naming the resource: a
    2025 session's notifications ride its GET stream, which opens a moment after initialize, so
    a first touch may go unheard."""
    uri = entry["subscribe_resource"]

    async def touch():
        return wire(await call_tool(entry["touch_tool"], entry.get("touch_arguments") or {}, None))

    for attempt in range(3):
        if attempt == 0 or entry.get("touch_repeat"):
            answer = texts((await touch()).get("content", []))
            off = entry.get("touch_off_text")
            if off and any(off in text for text in answer):
                await touch()
        with anyio.move_on_after(4):
            while uri not in UPDATES:
                await anyio.sleep(0.05)
        if uri in UPDATES:
            break
    return UPDATES.count(uri)


async def watch_legacy(subscribe_resource, call_tool, entry):
    await subscribe_resource(entry["subscribe_resource"])
    return {"via": "subscribe", "updated": await touch_until_updated(entry, call_tool)}


async def watch_modern(client, call_tool, entry):
    from mcp.client.subscriptions import ResourceUpdated

    async with client.listen(resource_subscriptions=[entry["subscribe_resource"]]) as subscription:
        honored = list(subscription.honored.resource_subscriptions or [])

        async def pump():
            async for event in subscription:
                if isinstance(event, ResourceUpdated):
                    UPDATES.append(str(event.uri))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(pump)
            updated = await touch_until_updated(entry, call_tool)
            tasks.cancel_scope.cancel()
    return {"via": "listen", "honored": honored, "updated": updated}


def wire(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def texts(blocks):
    out = []
    for block in blocks:
        if block.get("type") == "text":
            out.append(block["text"])
        elif "text" in block:
            out.append(block["text"])
    return out


async def attempt(operation):
    try:
        return await operation()
    except Exception as error:  # every failure of one operation is reported, not fatal
        return {"error": f"{type(error).__name__}: {error}"}


async def exercise(list_tools, call_tool, read_resource, get_prompt, complete, watch, plan):
    tools, cursor = [], None
    while True:
        page = wire(await list_tools(cursor))
        tools += [tool["name"] for tool in page["tools"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    ops = {}
    for entry in plan:

        async def call(entry=entry):
            result = wire(await call_tool(entry["tool"], entry.get("arguments") or {}, None))
            return {"text": texts(result.get("content", [])), "is_error": result.get("isError", False)}

        async def read(entry=entry):
            result = wire(await read_resource(entry["resource"]))
            return {"text": texts(result.get("contents", []))}

        async def prompt(entry=entry):
            result = wire(await get_prompt(entry["prompt"], entry.get("prompt_arguments") or {}))
            return {"text": texts([m["content"] for m in result.get("messages", [])])}

        async def progress(entry=entry):
            seen = []

            async def on_progress(value, total, message):
                seen.append(value)

            LOGS.clear()
            result = wire(await call_tool(entry["progress_tool"], entry.get("progress_arguments") or {}, on_progress))
            return {"text": texts(result.get("content", [])), "progress": len(seen), "logs": len(LOGS)}

        async def completion(entry=entry):
            result = wire(await complete(entry["complete_prompt"], entry["complete_argument"], entry["complete_value"]))
            return {"values": result["completion"]["values"]}

        async def elicit(entry=entry):
            result = wire(await call_tool(entry["elicit_tool"], entry.get("elicit_arguments") or {}, None))
            return {"text": texts(result.get("content", [])), "is_error": result.get("isError", False)}

        ops[entry["backend"]] = {
            "call": await attempt(call),
            "read": await attempt(read),
            "prompt": await attempt(prompt),
        }
        if entry.get("progress_tool"):
            ops[entry["backend"]]["progress"] = await attempt(progress)
        if entry.get("complete_prompt"):
            ops[entry["backend"]]["complete"] = await attempt(completion)
        if entry.get("elicit_tool"):
            ops[entry["backend"]]["elicit"] = await attempt(elicit)

        async def sample(entry=entry):
            result = wire(await call_tool(entry["sample_tool"], entry.get("sample_arguments") or {}, None))
            return {"text": texts(result.get("content", [])), "is_error": result.get("isError", False)}

        if entry.get("sample_tool"):
            ops[entry["backend"]]["sample"] = await attempt(sample)
        if entry.get("subscribe_resource"):
            ops[entry["backend"]]["subscribe"] = await attempt(lambda entry=entry: watch(entry))
    return {"tools": tools, "ops": ops}


async def run_v1(url, headers, plan):
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=60)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with mcp.ClientSession(
                read,
                write,
                elicitation_callback=on_elicit,
                sampling_callback=on_sample,
                logging_callback=on_log,
                message_handler=on_message,
            ) as session:
                init = await session.initialize()

                def call_tool(name, arguments, cb):
                    return session.call_tool(name, arguments, progress_callback=cb)

                summary = await exercise(
                    lambda cursor: session.list_tools(cursor=cursor),
                    call_tool,
                    lambda uri: session.read_resource(uri),
                    lambda name, arguments: session.get_prompt(name, arguments),
                    lambda prompt, name, value: session.complete(
                        mcp.types.PromptReference(type="ref/prompt", name=prompt), {"name": name, "value": value}
                    ),
                    lambda entry: watch_legacy(session.subscribe_resource, call_tool, entry),
                    plan,
                )
                return {"protocol_version": str(init.protocolVersion), **summary}


async def run_v2(url, headers, mode, plan):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(
            transport,
            mode=mode,
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
            logging_callback=on_log,
            message_handler=on_message,
            # 2026-07-28 servers send log messages only to requests that opt in.
            log_level="info",
        ) as client:

            def call_tool(name, arguments, cb):
                return client.call_tool(name, arguments, progress_callback=cb)

            async def watch(entry):
                if client.protocol_version == "2026-07-28":
                    return await watch_modern(client, call_tool, entry)
                return await watch_legacy(client.subscribe_resource, call_tool, entry)

            summary = await exercise(
                lambda cursor: client.list_tools(cursor=cursor),
                call_tool,
                lambda uri: client.read_resource(uri),
                lambda name, arguments: client.get_prompt(name, arguments),
                lambda prompt, name, value: client.complete(
                    mcp.types.PromptReference(type="ref/prompt", name=prompt), {"name": name, "value": value}
                ),
                watch,
                plan,
            )
            return {"protocol_version": client.protocol_version, **summary}


def main():
    url, token, mode, plan = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if MAJOR == 1:
        summary = asyncio.run(run_v1(url, headers, plan))
    else:
        summary = asyncio.run(run_v2(url, headers, mode, plan))
    print(json.dumps({"sdk": f"python {SDK_VERSION}", "mode": mode, **summary}))


if __name__ == "__main__":
    main()
