"""A stdio MCP server on the Python SDK 1.x (FastMCP), for the gateway's stdio-backend tests.

Tools: echo (text back), slow (progress per step), crash (the process exits mid-call), pid (its
process id), sample_with_progress (asks the client to sample, asking for progress on that request,
and says which progress values came back), ask_many (asks the client for `count` samples at once),
ping_many (pings the client `count` times), flood (`count` progress notifications of `size` bytes,
saying in a file how it ended), stall (the whole server stops for `seconds`, reading nothing,
after writing the file `started`). Extra command-line arguments are ignored (tests pass a marker to find the process).
With `PY_STDIO_INSTRUCTIONS_BYTES=n` in its environment its `initialize` result carries `n` bytes of
instructions (a backend describing itself at length).
`build` is also the tool set of `py_sse_server.py`.
"""

import asyncio
import os
import time

from mcp import types
from mcp.server.fastmcp import Context, FastMCP


def sampling_request(text: str) -> types.ServerRequest:
    """A `sampling/createMessage` request asking the client to complete `text`."""
    return types.ServerRequest(
        types.CreateMessageRequest(
            method="sampling/createMessage",
            params=types.CreateMessageRequestParams(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
                maxTokens=5,
            ),
        )
    )


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
    async def sample_with_progress(ctx: Context) -> str:
        """Asks the client for a sample with a progress token; reports the progress it got."""
        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        result = await ctx.session.send_request(
            sampling_request("hi"), types.CreateMessageResult, progress_callback=on_progress
        )
        return f"{prefix}: sampled {result.content.text}; progress {seen}"

    @mcp.tool()
    async def ask_many(count: int, ctx: Context) -> str:
        """Asks the client for `count` samples at once; says how many were answered."""

        async def one(n: int) -> str:
            result = await ctx.session.send_request(sampling_request(f"question {n}"), types.CreateMessageResult)
            return result.content.text

        answers = await asyncio.gather(*(one(n) for n in range(count)))
        return f"{prefix}: answered {len(answers)}"

    @mcp.tool()
    async def ping_many(count: int, ctx: Context) -> str:
        """Pings the client `count` times, one after another; says so once every ping was answered."""
        for _ in range(count):
            await ctx.session.send_ping()
        return f"{prefix}: pinged {count}"

    @mcp.tool()
    async def flood(count: int, size: int, ctx: Context, done: str = "") -> str:
        """Sends `count` progress notifications whose message is `size` bytes, then returns. With
        `done`, writes `<sent> finished` or `<sent> cancelled` to that file once it ends."""
        text = "x" * size
        sent = 0
        try:
            for n in range(1, count + 1):
                await ctx.report_progress(n, count, text)
                sent = n
        finally:
            if done:
                with open(done + ".tmp", "w") as marker:
                    marker.write(f"{sent} {'finished' if sent == count else 'cancelled'}")
                os.replace(done + ".tmp", done)
        return f"{prefix}: flooded {count}"

    @mcp.tool()
    async def stall(seconds: int, started: str) -> str:
        """Stops the whole server for `seconds` (its event loop blocks, so it reads nothing) once it
        wrote the file `started`; then says so."""
        with open(started + ".tmp", "w") as marker:
            marker.write("stalled")
        os.replace(started + ".tmp", started)
        time.sleep(seconds)
        return f"{prefix}: stalled {seconds}"

    @mcp.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    return mcp


if __name__ == "__main__":
    instructions = "x" * int(os.environ.get("PY_STDIO_INSTRUCTIONS_BYTES", "0"))
    build("py-stdio", "py", instructions=instructions or None).run()
