"""An HTTP+SSE (2024-11-05 transport) MCP server on the Python SDK 1.x (FastMCP), for the
gateway's SSE-backend tests.

Usage: py_sse_server.py [PORT]. Listens on 127.0.0.1:PORT (a free port when PORT is 0 or absent)
and prints `PORT <n>` on stdout once it accepts connections: the stream is at /sse, messages are
POSTed to /messages/. Tools: echo (text back), slow (progress per step), crash (the process exits
mid-call), pid (its process id): the tool set of `py_stdio_server.py`.
"""

import asyncio
import socket
import sys

import uvicorn
from py_stdio_server import build

mcp = build("py-sse", "py-sse", log_level="WARNING")


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
