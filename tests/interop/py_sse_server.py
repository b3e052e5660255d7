"""An HTTP+SSE (2024-11-05 transport) MCP server on the Python SDK 1.x (FastMCP), for the
gateway's SSE-backend tests.

Usage: py_sse_server.py [PORT]. Listens on 127.0.0.1:PORT (a free port when PORT is 0 or absent)
and prints `PORT <n>` on stdout once it accepts connections: the stream is at /sse, messages are
POSTed to /messages/. Tools: echo (text back), slow (progress per step), crash (the process exits
mid-call), pid (its process id).
"""

import asyncio
import os
import socket
import sys

import uvicorn
from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("py-sse", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Returns the text, prefixed with the server's name."""
    return f"py-sse: {text}"


@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress for each step, then says done."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps)
        await asyncio.sleep(0.01)
    return "py-sse: done"


@mcp.tool()
def crash() -> str:
    """Ends the process in the middle of the call."""
    os._exit(3)


@mcp.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


async def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    # Bound here (not by uvicorn) so the port is known before serving, and reusable at once by a
    # restarted server.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    config = uvicorn.Config(mcp.sse_app(), log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
