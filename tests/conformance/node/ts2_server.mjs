// A backend built on the official TypeScript SDK 2.x server (`@modelcontextprotocol/server`),
// for the interop matrix of `cargo xtask conformance`. `createMcpHandler` serves both eras on one
// endpoint: 2026-07-28 requests, and 2025 requests statelessly.
//
//   node ts2_server.mjs PORT
//
// Offers tool `echo {text}` (text `ts2: <text>`), resource `test://ts2/static` (text
// `static from ts2`), prompt `greet {who}` (one user message `Hello <who> from ts2`) with
// completions of `who` (`alice`, `bob`), and the feature tools of the matrix:
// - `slow {steps=3}`: a progress notification and an info log message per step, then `ts2: done`
//   (mid-call notifications turn the answer into an SSE stream);
// - `ask`: asks the user (elicitation) for `name` and `color` through a 2026-07-28
//   input_required round (`inputRequired.elicit`), answers `ts2: <name> likes <color>`;
// - `sample {prompt}`: asks the client's LLM through an input_required round
//   (`inputRequired.createMessage`), answers `ts2: sampled <text>`;
// - `touch`: publishes `notifications/resources/updated` for `test://ts2/static` to the open
//   `subscriptions/listen` streams (`handler.notify`), answers `ts2: touched`.
// Subscriptions exist only in 2026-07-28 (`subscriptions/listen`): the 2025 leg of
// `createMcpHandler` is stateless, so it has no stream to send a later notification on, and
// the SDK's 2025 push-style elicitation/sampling throw on a 2026-07-28 request (hence the
// input_required rounds, which a stateless 2025 request cannot carry either).
// The xtask copies this file next to the installed node_modules and runs it with Node 22.
import { createServer } from "node:http";
import {
  McpServer,
  acceptedContent,
  completable,
  createMcpHandler,
  fromJsonSchema,
  inputRequired,
} from "@modelcontextprotocol/server";
import { z } from "zod";

const STATIC_URI = "test://ts2/static";

const port = Number(process.argv[2]);
if (!port) {
  console.error("usage: node ts2_server.mjs PORT");
  process.exit(2);
}

// The handler is created below; `touch` publishes on its bus.
let handler;

function build() {
  const server = new McpServer(
    { name: "ts2-backend", version: "1.0.0" },
    { capabilities: { logging: {}, resources: { subscribe: true } } },
  );
  server.registerTool(
    "echo",
    {
      description: "Echoes the text back",
      inputSchema: fromJsonSchema({ type: "object", properties: { text: { type: "string" } }, required: ["text"] }),
    },
    async ({ text }) => ({ content: [{ type: "text", text: `ts2: ${text}` }] }),
  );
  server.registerResource("static", STATIC_URI, { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "static from ts2" }],
  }));
  server.registerPrompt(
    "greet",
    {
      description: "Greets someone",
      argsSchema: z.object({
        who: completable(z.string(), (value) => ["alice", "bob"].filter((name) => name.startsWith(value))),
      }),
    },
    ({ who }) => ({ messages: [{ role: "user", content: { type: "text", text: `Hello ${who} from ts2` } }] }),
  );
  registerFeatureTools(server);
  return server;
}

function registerFeatureTools(server) {
  const text = (value) => ({ content: [{ type: "text", text: value }] });
  server.registerTool(
    "slow",
    {
      description: "Reports progress in `steps` steps (with a log message each), then answers",
      inputSchema: z.object({ steps: z.number().int().min(1).max(10).default(3) }),
    },
    async ({ steps }, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      for (let step = 1; step <= steps; step += 1) {
        if (token !== undefined) {
          await ctx.mcpReq.notify({
            method: "notifications/progress",
            params: { progressToken: token, progress: step, total: steps, message: `ts2: step ${step}/${steps}` },
          });
        }
        await ctx.mcpReq.log("info", `ts2: step ${step}/${steps}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return text("ts2: done");
    },
  );
  const form = z.object({ name: z.string(), color: z.string() });
  server.registerTool("ask", { description: "Asks the user for a name and a colour" }, async (ctx) => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, "form", form);
    if (answer === undefined) {
      return inputRequired({
        inputRequests: { form: inputRequired.elicit({ message: "Who are you?", requestedSchema: form }) },
      });
    }
    return text(`ts2: ${answer.name} likes ${answer.color}`);
  });
  server.registerTool(
    "sample",
    { description: "Asks the client's LLM", inputSchema: z.object({ prompt: z.string() }) },
    async ({ prompt }, ctx) => {
      const sampled = ctx.mcpReq.inputResponses?.llm;
      if (sampled?.content?.type !== "text") {
        return inputRequired({
          inputRequests: {
            llm: inputRequired.createMessage({
              messages: [{ role: "user", content: { type: "text", text: prompt } }],
              maxTokens: 10,
            }),
          },
        });
      }
      return text(`ts2: sampled ${sampled.content.text}`);
    },
  );
  server.registerTool("touch", { description: `Announces a change of ${STATIC_URI}` }, async () => {
    handler.notify.resourceUpdated(STATIC_URI);
    return text("ts2: touched");
  });
}

handler = createMcpHandler(() => build());

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
