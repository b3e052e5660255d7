"""A stdio MCP server on the Python SDK 1.x (FastMCP), for the gateway's stdio-backend tests.

Tools: echo (text back), slow (progress per step), crash (the process exits mid-call), pid (its
process id). Extra command-line arguments are ignored (tests pass a marker to find the process).
`build` is also the tool set of `py_sse_server.py`.
"""

import asyncio
import os

from mcp.server.fastmcp import Context, FastMCP


def build(name: str, prefix: str, **settings) -> FastMCP:
    """A FastMCP server `name` whose texts start with `<prefix>: `."""
    mcp = FastMCP(name, **settings)

    @mcp.tool()
    def echo(text: str) -> str:
        """Returns the text, prefixed with the server's name."""
        return f"{prefix}: {text}"

    @mcp.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Reports progress for each step, then says done."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps)
            await asyncio.sleep(0.01)
        return f"{prefix}: done"

    @mcp.tool()
    def crash() -> str:
        """Ends the process in the middle of the call."""
        os._exit(3)

    @mcp.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    return mcp


if __name__ == "__main__":
    build("py-stdio", "py").run()
