"""A sampling client on the Python SDK 2.x, run by crates/mcp-gateway/tests/interop.rs against the gateway.

    python py_sampling_client.py URL TOKEN TOOL MODE PROMPT     (MODE: legacy or auto)

Declares sampling and answers every `sampling/createMessage` with `LLM says: <the prompt's
text>`. Calls TOOL with `{"prompt": PROMPT}` once without resolving `input_required` results
(so their shape is seen), then, if the first answer was one, again with the SDK's own driver.
Prints one JSON line: the negotiated protocol version, the first answer's `resultType` and
input request methods, the sampling requests the client was sent, and the final result's text.
Every HTTP exchange is traced to stderr.
"""

import asyncio
import json
import sys

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CreateMessageResult, TextContent
from py_client import traced, wire


async def run(url: str, token: str, tool: str, mode: str, prompt: str) -> dict:
    sampled = []

    async def on_sampling(context, params):
        asked = " ".join(m.content.text for m in params.messages if isinstance(m.content, TextContent))
        sampled.append(asked)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=f"LLM says: {asked}"), model="test-llm"
        )

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60), transport=traced(httpx2)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(transport, mode=mode, sampling_callback=on_sampling) as client:
            await client.list_tools()
            first = wire(await client.session.call_tool(tool, {"prompt": prompt}, allow_input_required=True))
            result_type = first.get("resultType", "complete")
            final = first
            if result_type == "input_required":
                final = wire(await client.call_tool(tool, {"prompt": prompt}))
            return {
                "protocol_version": client.protocol_version,
                "first_result_type": result_type,
                "input_requests": sorted(r["method"] for r in (first.get("inputRequests") or {}).values()),
                "sampled": sampled,
                "text": [b["text"] for b in final.get("content", []) if b.get("type") == "text"],
            }


def main() -> None:
    url, token, tool, mode, prompt = sys.argv[1:6]
    print(json.dumps(asyncio.run(run(url, token, tool, mode, prompt))))


if __name__ == "__main__":
    main()
