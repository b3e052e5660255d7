"""A dual-era stdio MCP server on the Python SDK 2.x (`MCPServer`): it answers `server/discover`
(2026-07-28) as well as `initialize`, for the gateway's tests of linked 2026-07-28 backends.

Tool: echo (text back as `py2: <text>`). With `PY_STDIO_INSTRUCTIONS_BYTES=n` in its environment
its `DiscoverResult` and `InitializeResult` carry `n` bytes of instructions (a backend describing
itself at length).
"""

import os

from mcp.server.mcpserver import MCPServer

if __name__ == "__main__":
    instructions = "x" * int(os.environ.get("PY_STDIO_INSTRUCTIONS_BYTES", "0"))
    server = MCPServer(name="py2-stdio", version="1.0.0", instructions=instructions or None)

    @server.tool(name="echo", description="Returns the text")
    def echo(text: str) -> str:
        return f"py2: {text}"

    server.run("stdio")
