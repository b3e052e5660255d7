"""A backend on the Python MCP SDK 1.x `FastMCP` (2025 sessions only), for the interop matrix of
`cargo xtask conformance`.

    python py_server.py PORT        (with .venv/mcp1/bin/python)

Offers tool `echo {text}` (text `py: <text>`), tool `slow {steps=3}` (progress and an info log
message per step, then `py: done`), resource `test://py/static` (text `static from py`), prompt `greet {who}` (one user
message `Hello <who> from py`) and completions of `greet`'s `who` (`alice`, `bob`).
"""

import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import Completion, PromptReference

server = FastMCP("py-backend", host="127.0.0.1", port=int(sys.argv[1]), log_level="WARNING")


@server.tool(description="Echoes the text back")
def echo(text: str) -> str:
    return f"py: {text}"


@server.resource("test://py/static", mime_type="text/plain")
def static() -> str:
    """A static text resource"""
    return "static from py"


@server.prompt(description="Greets someone")
def greet(who: str) -> str:
    return f"Hello {who} from py"


@server.tool(description="Reports progress in `steps` steps, then answers")
async def slow(ctx: Context, steps: int = 3) -> str:
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"py: step {step}/{steps}")
        await ctx.info(f"py: step {step}/{steps}")
        await anyio.sleep(0.02)
    return "py: done"


@server.completion()
async def complete(ref, argument, context) -> Completion | None:
    if isinstance(ref, PromptReference) and ref.name == "greet" and argument.name == "who":
        values = [v for v in ("alice", "bob") if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), hasMore=False)
    return None


if __name__ == "__main__":
    server.run(transport="streamable-http")
