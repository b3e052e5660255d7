// A backend built on the official TypeScript SDK 2.x server (`@modelcontextprotocol/server`),
// for the interop matrix of `cargo xtask conformance`. `createMcpHandler` serves both eras on one
// endpoint: 2026-07-28 requests, and 2025 requests statelessly.
//
//   node ts2_server.mjs PORT
//
// Offers tool `echo {text}` (text `ts2: <text>`), resource `test://ts2/static` (text
// `static from ts2`) and prompt `greet {who}` (one user message `Hello <who> from ts2`).
// The xtask copies this file next to the installed node_modules and runs it with Node 22.
import { createServer } from "node:http";
import { McpServer, createMcpHandler, fromJsonSchema } from "@modelcontextprotocol/server";

const port = Number(process.argv[2]);
if (!port) {
  console.error("usage: node ts2_server.mjs PORT");
  process.exit(2);
}

function build() {
  const server = new McpServer({ name: "ts2-backend", version: "1.0.0" });
  server.registerTool(
    "echo",
    {
      description: "Echoes the text back",
      inputSchema: fromJsonSchema({ type: "object", properties: { text: { type: "string" } }, required: ["text"] }),
    },
    async ({ text }) => ({ content: [{ type: "text", text: `ts2: ${text}` }] }),
  );
  server.registerResource("static", "test://ts2/static", { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "static from ts2" }],
  }));
  server.registerPrompt(
    "greet",
    {
      description: "Greets someone",
      argsSchema: fromJsonSchema({ type: "object", properties: { who: { type: "string" } }, required: ["who"] }),
    },
    ({ who }) => ({ messages: [{ role: "user", content: { type: "text", text: `Hello ${who} from ts2` } }] }),
  );
  return server;
}

const handler = createMcpHandler(() => build());

// node:http <-> fetch Request/Response, streaming the answer (SSE included).
createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (Array.isArray(value)) value.forEach((v) => headers.append(name, v));
      else if (value !== undefined) headers.set(name, value);
    }
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (error) {
    console.error(error);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
}).listen(port, "127.0.0.1");
