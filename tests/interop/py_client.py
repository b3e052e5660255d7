"""An MCP client built on the official Python SDK, run by crates/mcp-gateway/tests/interop.rs against the gateway.

    python py_client.py URL TOKEN TOOL MODE [--arguments JSON]
                        [--progress-tool NAME [--progress-arguments JSON]] [--read-links]

Works with `mcp` 1.x (MODE must be `legacy`: initialize + Mcp-Session-Id) and with `mcp` 2.x
(MODE `auto`, its default dual-era client that probes `server/discover` first, or `legacy`).
Sends `Authorization: Bearer TOKEN` on every request, lists the tools, calls TOOL with the
arguments, optionally reads back every `resource_link` the call returned (`--read-links`) and
calls a progress-emitting tool, and prints one JSON line with what it saw.
Any failure raises, so the process exits non-zero with the traceback on stderr. Every HTTP
request and response (headers and body, SSE as it streams) is traced to stderr too, so a failure
shows the exchange that broke.
"""

import argparse
import asyncio
import json
import sys
from importlib.metadata import version

import mcp

SDK_VERSION = version("mcp")
MAJOR = int(SDK_VERSION.split(".")[0])


def trace(line):
    print(line, file=sys.stderr, flush=True)


def traced(httpx):
    """A transport of the `httpx` module given (httpx for mcp 1.x, httpx2 for 2.x) that traces
    every exchange to stderr, response bodies chunk by chunk as the SDK reads them."""

    class TracedStream(httpx.AsyncByteStream):
        def __init__(self, inner):
            self.inner = inner

        async def __aiter__(self):
            async for chunk in self.inner:
                trace(f"< {chunk.decode(errors='replace')!r}")
                yield chunk

        async def aclose(self):
            await self.inner.aclose()

    class TracedTransport(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request):
            headers = "".join(f"\n>   {k}: {v}" for k, v in request.headers.multi_items())
            body = request.content.decode(errors="replace") if request.method == "POST" else ""
            trace(f"> {request.method} {request.url}{headers}\n>   {body}")
            response = await super().handle_async_request(request)
            headers = "".join(f"\n<   {k}: {v}" for k, v in response.headers.multi_items())
            trace(f"< {response.status_code} (for {request.method}){headers}")
            response.stream = TracedStream(response.stream)
            return response

    return TracedTransport()


def wire(result):
    """A result as it was on the wire (1.x and 2.x name the Python attributes differently)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def texts(result):
    return [block["text"] for block in wire(result)["content"] if block["type"] == "text"]


async def exercise(list_tools, call_tool, read_resource, args):
    """Lists every page of tools, calls the tools, reads links; returns the summary's common part."""
    tools, cursor = [], None
    while True:
        page = wire(await list_tools(cursor))
        tools += [tool["name"] for tool in page["tools"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    result = await call_tool(args.tool, json.loads(args.arguments), None)
    summary = {
        "tools": tools,
        "call": {"tool": args.tool, "is_error": wire(result).get("isError", False), "text": texts(result)},
    }
    if args.read_links:
        links = []
        for block in wire(result)["content"]:
            if block["type"] == "resource_link":
                contents = wire(await read_resource(block["uri"]))["contents"]
                links.append({"uri": block["uri"], "read": contents})
        summary["links"] = links
    if args.progress_tool:
        progress = []

        async def on_progress(value, total, message):
            progress.append({"progress": value, "total": total, "message": message})

        result = await call_tool(args.progress_tool, json.loads(args.progress_arguments), on_progress)
        summary["progress_call"] = {"tool": args.progress_tool, "text": texts(result), "progress": progress}
    return summary


async def run_v1(args, headers):
    import httpx
    from mcp.client.streamable_http import streamable_http_client
    from pydantic import AnyUrl

    transport = traced(httpx)
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=60), transport=transport) as http:
        async with streamable_http_client(args.url, http_client=http) as (read, write, session_id):
            async with mcp.ClientSession(read, write) as session:
                init = await session.initialize()
                summary = await exercise(
                    lambda cursor: session.list_tools(cursor=cursor),
                    lambda name, arguments, cb: session.call_tool(name, arguments, progress_callback=cb),
                    lambda uri: session.read_resource(AnyUrl(uri)),
                    args,
                )
                return {
                    "protocol_version": str(init.protocolVersion),
                    "server_name": init.serverInfo.name,
                    "session_id": session_id() is not None,
                    **summary,
                }


async def run_v2(args, headers):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    transport = traced(httpx2)
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60), transport=transport) as http:
        async with mcp.Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as client:
            summary = await exercise(
                lambda cursor: client.list_tools(cursor=cursor),
                lambda name, arguments, cb: client.call_tool(name, arguments, progress_callback=cb),
                lambda uri: client.read_resource(uri),
                args,
            )
            info = client.server_info
            return {
                "protocol_version": client.protocol_version,
                "server_name": info.name if info else None,
                **summary,
            }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("tool", help="the (prefixed) tool to call")
    parser.add_argument("mode", choices=["legacy", "auto"])
    parser.add_argument("--arguments", default='{"text": "hello from python"}')
    parser.add_argument("--progress-tool")
    parser.add_argument("--progress-arguments", default="{}")
    parser.add_argument("--read-links", action="store_true", help="read back the call's resource links")
    args = parser.parse_args()
    if MAJOR == 1 and args.mode != "legacy":
        parser.error("mcp 1.x only speaks the legacy (initialize) era")
    headers = {"Authorization": f"Bearer {args.token}"}
    run = run_v1 if MAJOR == 1 else run_v2
    summary = asyncio.run(run(args, headers))
    print(json.dumps({"sdk": "python", "sdk_version": SDK_VERSION, "mode": args.mode, **summary}))


if __name__ == "__main__":
    main()
