"""A 2024-11-05 HTTP+SSE client on the official Python SDK 1.x, run by
crates/mcp-gateway/tests/sse_downstream.rs against the gateway's SSE bridge.

    python py_sse_client.py SSE_URL TOKEN TOOL ARGUMENTS PROMPT PROGRESS_TOOL PROGRESS_ARGUMENTS

Opens the SSE stream with `mcp.client.sse.sse_client` (`Authorization: Bearer TOKEN` on every
request), initializes, sets the log level to `info`, lists tools, resources and prompts, calls TOOL
with the JSON ARGUMENTS, reads every listed resource, gets PROMPT with `who=python`, calls
PROGRESS_TOOL with a progress callback (and waits for its log messages), then closes the stream and
prints one JSON line with what it saw. Any failure raises (non-zero exit, traceback on stderr); every HTTP exchange is traced to
stderr (see py_client.py).
"""

import asyncio
import json
import sys
from importlib.metadata import version

import anyio
import httpx
import mcp
from mcp.client.sse import sse_client

from py_client import texts, traced, wire


async def logs_of(steps, logs):
    """Waits (at most 20 s) until the call's log messages are in: a backend sends them as
    session notifications, which reach the client on the stream the gateway relays from its GET
    stream, so the last one may come after the call's result."""
    with anyio.move_on_after(20):
        while len(logs) < steps:
            await anyio.sleep(0.05)


def client_factory(headers=None, timeout=None, auth=None):
    return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=traced(httpx))


async def run(url, token, tool, arguments, prompt, progress_tool, progress_arguments):
    sessions = []
    logs = []
    progress = []

    async def on_log(params):
        logs.append(wire(params))

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})

    headers = {"Authorization": f"Bearer {token}"}
    async with sse_client(
        url, headers=headers, timeout=30, httpx_client_factory=client_factory, on_session_created=sessions.append
    ) as (read, write):
        async with mcp.ClientSession(read, write, logging_callback=on_log) as session:
            init = await session.initialize()
            await session.set_logging_level("info")
            tools = [t.name for t in (await session.list_tools()).tools]
            called = await session.call_tool(tool, json.loads(arguments))
            resources = [r.uri for r in (await session.list_resources()).resources]
            read_texts = {}
            for uri in resources:
                contents = wire(await session.read_resource(uri))["contents"]
                read_texts[str(uri)] = [c.get("text") for c in contents]
            prompts = [p.name for p in (await session.list_prompts()).prompts]
            got = wire(await session.get_prompt(prompt, {"who": "python"}))
            slow_args = json.loads(progress_arguments)
            slow = await session.call_tool(progress_tool, slow_args, progress_callback=on_progress)
            await logs_of(slow_args.get("steps", 3), logs)
    return {
        "sdk_version": version("mcp"),
        "protocol_version": str(init.protocolVersion),
        "server_name": init.serverInfo.name,
        "session_ids": sessions,
        "tools": tools,
        "call": {"tool": tool, "is_error": wire(called).get("isError", False), "text": texts(called)},
        "resources": read_texts,
        "prompts": prompts,
        "prompt": [m["content"].get("text") for m in got["messages"]],
        "progress_call": {"tool": progress_tool, "text": texts(slow), "progress": progress},
        "logs": logs,
    }


def main():
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    summary = asyncio.run(run(*sys.argv[1:]))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
