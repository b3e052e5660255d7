// An interop-matrix client of `cargo xtask conformance` on the official TypeScript SDK:
// SDK 1.x (`@modelcontextprotocol/sdk`, 2025 sessions) or SDK 2.x (`@modelcontextprotocol/client`,
// `versionNegotiation: { mode: "auto" }`: `server/discover` first, 2026-07-28 when spoken).
//
//   node ts_cell.mjs 1|2 URL TOKEN PLAN_JSON
//
// Sends `Authorization: Bearer TOKEN` (when not empty), lists every page of tools, then per entry
// of PLAN_JSON (`[{backend, tool, arguments, resource, prompt, prompt_arguments}]`) calls the
// tool, reads the resource and gets the prompt (and, when the entry names them, calls
// `progress_tool` counting progress notifications and asks for completions of
// `complete_prompt`'s `complete_argument`, and calls `elicit_tool`, answering its elicitations
// `name` -> Ferris, `color` -> orange; the SDKs drive 2026-07-28 input-required rounds through the
// same handler), and calls `sample_tool`, answering its sampling request `sampled by the matrix`;
// log messages received during the progress call are counted; and, with `subscribe_resource`,
// subscribes to that resource (`resources/subscribe` in a 2025 session, `subscriptions/listen`
// in 2026-07-28), calls `touch_tool` (again on each retry when `touch_repeat`, and at once when
// its answer contains `touch_off_text`: a tool that toggles updates, found on, was switched off)
// and waits for
// `notifications/resources/updated` naming it). Prints one JSON line with the texts seen or the
// error of each operation; the xtask judges it. The xtask copies this file next to the installed
// node_modules and runs it with Node 22.
import { readFileSync } from "node:fs";

const [major, url, token, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const headers = token ? { Authorization: `Bearer ${token}` } : {};

// Elicitation answers: `name` -> Ferris, `color` -> orange, a plain value for other required fields.
function answerForm(schema = {}) {
  const properties = schema.properties ?? {};
  const wanted = new Set([...(schema.required ?? []), ...["name", "color"].filter((k) => k in properties)]);
  const content = {};
  for (const key of wanted) {
    const spec = properties[key] ?? {};
    if (key === "name") content[key] = "Ferris";
    else if (key === "color") content[key] = "orange";
    else if (spec.enum) content[key] = spec.enum[0];
    else if (spec.type === "boolean") content[key] = true;
    else if (spec.type === "integer" || spec.type === "number") content[key] = Math.max(1, spec.minimum ?? 1);
    else content[key] = "x";
  }
  return content;
}
const onElicit = async (request) => ({ action: "accept", content: answerForm(request.params.requestedSchema) });
const onSample = async () => ({
  role: "assistant",
  content: { type: "text", text: "sampled by the matrix" },
  model: "matrix",
});
let logs = 0;
const onLog = () => (logs += 1);
// The URIs of the notifications/resources/updated received, in order.
const updated = [];
const onUpdated = (notification) => updated.push(notification.params.uri);
const capabilities = { elicitation: {}, sampling: {} };

let client;
let transport;
let sdk;
if (major === "1") {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const { ElicitRequestSchema, CreateMessageRequestSchema, LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } = await import(
    "@modelcontextprotocol/sdk/types.js"
  );
  sdk = "@modelcontextprotocol/sdk";
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  client = new Client({ name: "matrix-ts1", version: "0.0.0" }, { capabilities });
  client.setRequestHandler(ElicitRequestSchema, onElicit);
  client.setRequestHandler(CreateMessageRequestSchema, onSample);
  client.setNotificationHandler(LoggingMessageNotificationSchema, onLog);
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, onUpdated);
} else {
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  sdk = "@modelcontextprotocol/client";
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  client = new Client({ name: "matrix-ts2", version: "0.0.0" }, { capabilities, versionNegotiation: { mode: "auto" } });
  client.setRequestHandler("elicitation/create", onElicit);
  client.setRequestHandler("sampling/createMessage", onSample);
  client.setNotificationHandler("notifications/message", onLog);
  // Also where a 2026-07-28 `listen()` stream delivers its notifications.
  client.setNotificationHandler("notifications/resources/updated", onUpdated);
}
const version = JSON.parse(readFileSync(new URL(`./node_modules/${sdk}/package.json`, import.meta.url))).version;
await client.connect(transport);

const texts = (blocks) => blocks.filter((b) => typeof b.text === "string").map((b) => b.text);
const attempt = async (operation) => {
  try {
    return await operation();
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const modern = () => (client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion) === "2026-07-28";

// Subscribes to `entry.subscribe_resource`, touches, waits up to 4 s per attempt (3 attempts)
// for an update naming it: a 2025 session's notifications ride its GET stream, which opens a
// moment after initialize, so a first touch may go unheard.
async function watch(entry) {
  const uri = entry.subscribe_resource;
  let subscription;
  let honored;
  if (modern()) {
    subscription = await client.listen({ resourceSubscriptions: [uri] });
    honored = subscription.honoredFilter.resourceSubscriptions ?? [];
  } else {
    await client.subscribeResource({ uri });
  }
  try {
    for (let attempt = 0; attempt < 3 && !updated.includes(uri); attempt += 1) {
      if (attempt === 0 || entry.touch_repeat) {
        const touch = () => client.callTool({ name: entry.touch_tool, arguments: entry.touch_arguments ?? {} });
        const answer = texts((await touch()).content ?? []);
        if (entry.touch_off_text && answer.some((text) => text.includes(entry.touch_off_text))) await touch();
      }
      for (let waited = 0; waited < 4000 && !updated.includes(uri); waited += 50) await sleep(50);
    }
  } finally {
    await subscription?.close();
  }
  return { via: subscription ? "listen" : "subscribe", honored, updated: updated.filter((u) => u === uri).length };
}

const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : undefined);
  tools.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);

const ops = {};
for (const entry of plan) {
  ops[entry.backend] = {
    call: await attempt(async () => {
      const result = await client.callTool({ name: entry.tool, arguments: entry.arguments ?? {} });
      return { text: texts(result.content ?? []), is_error: result.isError ?? false };
    }),
    read: await attempt(async () => {
      const result = await client.readResource({ uri: entry.resource });
      return { text: texts(result.contents ?? []) };
    }),
    prompt: await attempt(async () => {
      const result = await client.getPrompt({ name: entry.prompt, arguments: entry.prompt_arguments ?? {} });
      return { text: texts(result.messages.map((m) => m.content)) };
    }),
  };
  if (entry.progress_tool) {
    ops[entry.backend].progress = await attempt(async () => {
      let progress = 0;
      logs = 0;
      const params = { name: entry.progress_tool, arguments: entry.progress_arguments ?? {} };
      const onprogress = () => (progress += 1);
      // SDK 1.x: callTool(params, resultSchema, options); 2.x: callTool(params, options).
      const result =
        major === "1" ? await client.callTool(params, undefined, { onprogress }) : await client.callTool(params, { onprogress });
      return { text: texts(result.content ?? []), progress, logs };
    });
  }
  if (entry.elicit_tool) {
    ops[entry.backend].elicit = await attempt(async () => {
      const result = await client.callTool({ name: entry.elicit_tool, arguments: entry.elicit_arguments ?? {} });
      return { text: texts(result.content ?? []), is_error: result.isError ?? false };
    });
  }
  if (entry.sample_tool) {
    ops[entry.backend].sample = await attempt(async () => {
      const result = await client.callTool({ name: entry.sample_tool, arguments: entry.sample_arguments ?? {} });
      return { text: texts(result.content ?? []), is_error: result.isError ?? false };
    });
  }
  if (entry.subscribe_resource) {
    ops[entry.backend].subscribe = await attempt(() => watch(entry));
  }
  if (entry.complete_prompt) {
    ops[entry.backend].complete = await attempt(async () => {
      const result = await client.complete({
        ref: { type: "ref/prompt", name: entry.complete_prompt },
        argument: { name: entry.complete_argument, value: entry.complete_value },
      });
      return { values: result.completion.values };
    });
  }
}

const protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
if (major === "1") await transport.terminateSession().catch(() => {});
await client.close();
console.log(JSON.stringify({ sdk: `${sdk} ${version}`, mode: major === "1" ? "legacy" : "auto", protocol_version: protocolVersion, tools, ops }));
