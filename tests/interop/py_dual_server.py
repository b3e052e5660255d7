"""A dual-era MCP server on the Python SDK 2.x (`MCPServer`) whose tool samples the 2025 way, for
the gateway's era-per-caller tests (crates/mcp-gateway/tests/interop.rs).

Usage: py_dual_server.py [PORT] (with .venv/mcp2/bin/python). Listens on 127.0.0.1:PORT (a free
port when PORT is 0 or absent), serves streamable HTTP at /mcp in both eras (2025 sessions and
stateless 2026-07-28), and prints `PORT <n>` on stdout once it accepts connections.

Tool `sample {prompt}`: in a 2025 session, a real server-initiated `sampling/createMessage` inside
the call (the only way there is in 2025); in 2026-07-28, an `input_required` result asking for the
same sampling (MRTR), answered on the retry. Either way the text is
`py2 <protocol version the tool ran in>: <the sampled text>`, so a test sees which era the
gateway used upstream.
"""

import asyncio
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, InputRequiredResult, SamplingMessage, TextContent

MODERN = "2026-07-28"

server = MCPServer(name="py-dual", version="1.0.0")


def text(value: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=value)])


@server.tool(name="sample", description="Asks the client's LLM to complete the prompt")
async def sample(prompt: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    version = ctx.request_context.session.protocol_version
    if version != MODERN:
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=50,
            related_request_id=ctx.request_id,
        )
        return text(f"py2 {version}: {getattr(result.content, 'text', None)}")
    answer = (ctx.input_responses or {}).get("llm")
    if answer is None:
        message = {"role": "user", "content": {"type": "text", "text": prompt}}
        request = {"method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": 50}}
        return InputRequiredResult.model_validate({"resultType": "input_required", "inputRequests": {"llm": request}})
    wire: dict[str, Any] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    return text(f"py2 {version}: {(wire.get('content') or {}).get('text')}")


async def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    # Bound here (not by uvicorn) so the port is known before serving.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{bound}", f"localhost:{bound}"],
        allowed_origins=[f"http://127.0.0.1:{bound}", f"http://localhost:{bound}"],
    )
    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=security, host="127.0.0.1")
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(uvicorn_server.serve(sockets=[sock]))
    while not uvicorn_server.started:
        await asyncio.sleep(0.01)
    print(f"PORT {bound}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
