// An MCP client built on the official TypeScript SDK 1.x, run by crates/mcp-gateway/tests/interop.rs against the
// gateway. It lives next to package.json so that Node resolves the pinned SDK from node_modules.
//
//   node ts_client.mjs URL TOKEN TOOL ARGUMENTS_JSON [PROGRESS_TOOL PROGRESS_ARGUMENTS_JSON]
//
// Legacy session (initialize + Mcp-Session-Id) with `Authorization: Bearer TOKEN` on every
// request: lists every page of tools, calls TOOL, optionally calls a progress-emitting tool, and
// prints one JSON line with what it saw. Any failure exits non-zero with the error on stderr.
// Every HTTP request and response (headers and body, SSE as it streams) is traced to stderr too,
// so a failure shows the exchange that broke.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool, argumentsJson, progressTool, progressArgumentsJson] = process.argv.slice(2);
if (!url || !token || !tool || !argumentsJson) {
  console.error("usage: node ts_client.mjs URL TOKEN TOOL ARGUMENTS_JSON [PROGRESS_TOOL PROGRESS_ARGUMENTS_JSON]");
  process.exit(2);
}

const sdkVersion = JSON.parse(
  readFileSync(new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url)),
).version;
const texts = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text);

// fetch, tracing each exchange to stderr; response bodies chunk by chunk as the SDK reads them.
async function tracedFetch(input, init = {}) {
  const headers = [...new Headers(init.headers)].map(([k, v]) => `\n>   ${k}: ${v}`).join("");
  console.error(`> ${init.method ?? "GET"} ${input}${headers}\n>   ${init.body ?? ""}`);
  const response = await fetch(input, init);
  const shown = [...response.headers].map(([k, v]) => `\n<   ${k}: ${v}`).join("");
  console.error(`< ${response.status} (for ${init.method ?? "GET"})${shown}`);
  if (!response.body) return response;
  const decoder = new TextDecoder();
  const body = response.body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        console.error(`< ${JSON.stringify(decoder.decode(chunk, { stream: true }))}`);
        controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
  fetch: tracedFetch,
});
const client = new Client({ name: "interop-ts-client", version: "0.0.0" });
await client.connect(transport);

const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : undefined);
  tools.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);

const result = await client.callTool({ name: tool, arguments: JSON.parse(argumentsJson) });
const summary = {
  sdk: "typescript",
  sdk_version: sdkVersion,
  mode: "legacy",
  protocol_version: transport.protocolVersion,
  server_name: client.getServerVersion()?.name,
  session_id: transport.sessionId !== undefined,
  tools,
  call: { tool, is_error: result.isError ?? false, text: texts(result) },
};

if (progressTool) {
  const progress = [];
  const slow = await client.callTool(
    { name: progressTool, arguments: JSON.parse(progressArgumentsJson ?? "{}") },
    undefined,
    { onprogress: (p) => progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null }) },
  );
  summary.progress_call = { tool: progressTool, text: texts(slow), progress };
}

await transport.terminateSession();
await client.close();
console.log(JSON.stringify(summary));
