"""A stateful streamable-HTTP MCP server on the Python SDK 1.x (FastMCP), for the test of several
gateway nodes sharing one upstream session (crates/mcp-gateway/tests/shared_upstream_session.rs).

Usage: py_fastmcp_server.py [PORT]. Listens on 127.0.0.1:PORT (a free port when PORT is 0 or
absent), serves streamable HTTP at /mcp with sessions, and prints `PORT <n>` on stdout once it
accepts connections. Like every FastMCP 1.x server it keeps one response stream per request id
within a session: two requests with the same id in one session get one answer between them, which
is what the test guards against.

Tools (each answer is one JSON text naming what the call saw, so the test can check that every
answer is its own call's and that all calls ran in one upstream session):
- echo {text}: after a short pause (so concurrent calls overlap),
  `{"text": text, "session": <Mcp-Session-Id>, "request": <JSON-RPC id>}`.
- progress {text, steps}: `steps` progress notifications whose message is `text`, then the same
  JSON as echo.
"""

import asyncio
import json
import socket
import sys

import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.transport_security import TransportSecuritySettings


def seen(text: str, ctx: Context) -> str:
    request = ctx.request_context.request
    session = request.headers.get("mcp-session-id") if request is not None else None
    return json.dumps({"text": text, "session": session, "request": ctx.request_id})


def build(port: int) -> FastMCP:
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
    )
    mcp = FastMCP("py-fastmcp", log_level="WARNING", transport_security=security)

    @mcp.tool()
    async def echo(text: str, ctx: Context) -> str:
        """Returns the text with the session and request id it ran in."""
        await asyncio.sleep(0.02)
        return seen(text, ctx)

    @mcp.tool()
    async def progress(text: str, steps: int, ctx: Context) -> str:
        """Reports `steps` progress notifications carrying the text, then returns like echo."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, message=text)
            await asyncio.sleep(0.01)
        return seen(text, ctx)

    return mcp


async def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    # Bound here (not by uvicorn) so the port is known before serving.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(256)
    bound = sock.getsockname()[1]
    app = build(bound).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    print(f"PORT {bound}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
