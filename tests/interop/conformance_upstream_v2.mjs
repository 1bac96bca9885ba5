// A dual-era MCP server of our own on the official TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0), written for the conformance suite's
// server scenarios: the fixture tools, prompts and resources the scenarios
// name, served to 2026-07-28 clients (per-request envelope) and to
// handshake clients (sessions) on one endpoint, /mcp. Its change hooks tell
// the open subscriptions/listen streams when the tool or prompt list changed;
// handshake sessions keep their SSE events, so streams can be resumed.
//
// usage: node conformance_upstream_v2.mjs   (logs "listening on http://127.0.0.1:PORT" on stderr)
import { createServer } from "node:http";
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import {
  McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ResourceTemplate,
  WebStandardStreamableHTTPServerTransport,
  completable,
  createMcpHandler,
  fromJsonSchema,
  isLegacyRequest,
} from "@modelcontextprotocol/server";
import { localhostHostValidation, localhostOriginValidation, toNodeHandler } from "@modelcontextprotocol/node";
import { z } from "zod";
import { listenOnLoopback } from "./http_server.mjs";

// A 1×1 PNG and a minimal WAV, base64.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAIlYAAESsAAACABAAZGF0YQAAAAA=";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (value) => ({ content: [{ type: "text", text: value }] });

// requestState: a payload the client must hand back untouched, signed with
// a key of this process.
const STATE_KEY = randomBytes(32);
const mac = (payload) => createHmac("sha256", STATE_KEY).update(payload).digest("base64url");
const sealState = (value) => {
  const payload = Buffer.from(JSON.stringify(value)).toString("base64url");
  return `${payload}.${mac(payload)}`;
};
function openState(state) {
  const [payload, tag] = String(state ?? "").split(".");
  const expected = payload ? Buffer.from(mac(payload)) : Buffer.alloc(0);
  if (!tag || Buffer.from(tag).length !== expected.length || !timingSafeEqual(Buffer.from(tag), expected)) {
    throw new ProtocolError(-32602, "requestState failed its integrity check");
  }
  return JSON.parse(Buffer.from(payload, "base64url").toString());
}

const askName = (message = "What is your name?") => ({
  method: "elicitation/create",
  params: {
    message,
    requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  },
});
const inputRequired = (inputRequests, requestState) => ({
  resultType: "input_required",
  inputRequests,
  ...(requestState === undefined ? {} : { requestState }),
});
// What the 2026-07-28 envelope of this request says.
const CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";
const LOG_LEVEL = "io.modelcontextprotocol/logLevel";
const envelope = (ctx, key) => ctx.mcpReq.envelope?.[key];
// The requestState the client echoed, as it sent it.
const rawState = (ctx) =>
  typeof ctx.mcpReq.requestState === "function" ? ctx.mcpReq.requestState() : ctx.mcpReq.requestState;
const answered = (responses, key) => responses && typeof responses === "object" && responses[key] !== undefined;
const elicited = (response, field) => response?.content?.[field] ?? response?.result?.content?.[field];

// The multi-round-trip diagnostics of the 2026-07-28 era (SEP-2322).
function inputRequiredTools(server) {
  server.registerTool(
    "test_input_required_result_elicitation",
    { description: "Asks for the user's name before it greets", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (responses !== undefined && (responses === null || typeof responses !== "object" || Array.isArray(responses))) {
        throw new ProtocolError(-32602, "inputResponses must be an object");
      }
      if (!answered(responses, "user_name")) return inputRequired({ user_name: askName() });
      const name = elicited(responses.user_name, "name");
      if (typeof name !== "string") return inputRequired({ user_name: askName("Please give your name as text") });
      return text(`Hello, ${name}!`);
    },
  );
  server.registerTool(
    "test_input_required_result_sampling",
    { description: "Asks the client's model a question first", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (!answered(responses, "capital_question")) {
        return inputRequired({
          capital_question: {
            method: "sampling/createMessage",
            params: {
              messages: [{ role: "user", content: { type: "text", text: "What is the capital of France?" } }],
              maxTokens: 100,
            },
          },
        });
      }
      const reply = responses.capital_question;
      return text(`The model said: ${reply?.content?.text ?? reply?.result?.content?.text ?? "(nothing)"}`);
    },
  );
  server.registerTool(
    "test_input_required_result_list_roots",
    { description: "Asks the client for its roots first", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (!answered(responses, "client_roots")) {
        return inputRequired({ client_roots: { method: "roots/list", params: {} } });
      }
      const roots = responses.client_roots?.roots ?? responses.client_roots?.result?.roots ?? [];
      return text(`Roots: ${roots.map((root) => root.uri).join(", ") || "(none)"}`);
    },
  );
  server.registerTool(
    "test_input_required_result_request_state",
    { description: "Asks for confirmation and keeps its own state", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (!answered(responses, "confirm")) {
        return inputRequired(
          {
            confirm: {
              method: "elicitation/create",
              params: {
                message: "Please confirm",
                requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
              },
            },
          },
          sealState({ step: "confirm" }),
        );
      }
      const state = openState(rawState(ctx));
      return text(`Confirmed; state-ok (${state.step})`);
    },
  );
  server.registerTool(
    "test_input_required_result_multiple_inputs",
    { description: "Asks for a name, a greeting and the roots at once", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      const keys = ["user_name", "greeting", "client_roots"];
      if (!keys.every((key) => answered(responses, key))) {
        return inputRequired(
          {
            user_name: askName(),
            greeting: {
              method: "sampling/createMessage",
              params: { messages: [{ role: "user", content: { type: "text", text: "Generate a greeting" } }], maxTokens: 50 },
            },
            client_roots: { method: "roots/list", params: {} },
          },
          sealState({ step: "all" }),
        );
      }
      openState(rawState(ctx));
      return text("Received every input");
    },
  );
  server.registerTool(
    "test_input_required_result_multi_round",
    { description: "Asks two questions, one round each", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (answered(responses, "step2")) {
        const state = openState(rawState(ctx));
        return text(`${state.name} likes ${elicited(responses.step2, "color")}`);
      }
      if (answered(responses, "step1")) {
        openState(rawState(ctx));
        const color = {
          method: "elicitation/create",
          params: {
            message: "Step 2: What is your favorite color?",
            requestedSchema: { type: "object", properties: { color: { type: "string" } }, required: ["color"] },
          },
        };
        return inputRequired({ step2: color }, sealState({ round: 2, name: elicited(responses.step1, "name") }));
      }
      return inputRequired({ step1: askName("Step 1: What is your name?") }, sealState({ round: 1 }));
    },
  );
  server.registerTool(
    "test_input_required_result_tampered_state",
    { description: "Refuses a requestState it did not sign", inputSchema: z.object({}) },
    async (_args, ctx) => {
      if (!answered(ctx.mcpReq.inputResponses, "user_name")) {
        return inputRequired({ user_name: askName() }, sealState({ step: "name" }));
      }
      openState(rawState(ctx));
      return text("State verified");
    },
  );
  server.registerTool(
    "test_input_required_result_capabilities",
    { description: "Asks only for what the client declared it can give", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const declared = envelope(ctx, CLIENT_CAPABILITIES) ?? {};
      if (ctx.mcpReq.inputResponses) return text("Answered with what the client supports");
      const requests = {};
      if (declared.elicitation) requests.user_name = askName();
      if (declared.sampling) {
        requests.summary = {
          method: "sampling/createMessage",
          params: { messages: [{ role: "user", content: { type: "text", text: "Summarize" } }], maxTokens: 50 },
        };
      }
      if (declared.roots) requests.client_roots = { method: "roots/list", params: {} };
      return Object.keys(requests).length ? inputRequired(requests) : text("Nothing to ask this client");
    },
  );
  server.registerPrompt(
    "test_input_required_result_prompt",
    { description: "A prompt that asks for context first" },
    async (ctx) => {
      const responses = ctx?.mcpReq?.inputResponses;
      if (!answered(responses, "user_context")) {
        return inputRequired({
          user_context: {
            method: "elicitation/create",
            params: {
              message: "What context should the prompt use?",
              requestedSchema: { type: "object", properties: { context: { type: "string" } }, required: ["context"] },
            },
          },
        });
      }
      const context = elicited(responses.user_context, "context") ?? "none";
      return { messages: [{ role: "user", content: { type: "text", text: `Answer with this context: ${context}` } }] };
    },
  );
}

// The diagnostics of the stateless-era scenario (SEP-2575).
function statelessDiagnostics(server) {
  server.registerTool(
    "test_missing_capability",
    { description: "Needs the client's sampling capability", inputSchema: z.object({}) },
    async () =>
      inputRequired({
        summary: {
          method: "sampling/createMessage",
          params: { messages: [{ role: "user", content: { type: "text", text: "Say hi" } }], maxTokens: 20 },
        },
      }),
  );
  server.registerTool(
    "test_streaming_elicitation",
    { description: "Asks the user a question, the stateless way", inputSchema: z.object({}) },
    async (_args, ctx) => {
      if (!answered(ctx.mcpReq.inputResponses, "user_name")) return inputRequired({ user_name: askName() });
      return text("Thanks");
    },
  );
  server.registerTool(
    "test_logging_tool",
    { description: "Logs at each level while it runs", inputSchema: z.object({}) },
    async (_args, ctx) => {
      for (const level of ["debug", "info", "warning", "error"]) {
        await ctx.mcpReq.log(level, `${level} line`);
      }
      return text("Logged");
    },
  );
  server.registerTool(
    "test_custom_headers",
    {
      description: "Mirrors parameters in Mcp-Param headers",
      inputSchema: fromJsonSchema({
        type: "object",
        properties: {
          region: { type: "string", description: "Region to serve", "x-mcp-header": "Region" },
          priority: { type: "integer", description: "Priority", "x-mcp-header": "Priority" },
          verbose: { type: "boolean", description: "Verbosity", "x-mcp-header": "Verbose" },
          query: { type: "string", description: "Free text" },
        },
        required: ["region"],
      }),
    },
    async (args) => text(`Served ${args.region}`),
  );
}

// The change hooks of the 2026-07-28 subscription checks: each tells the
// open subscriptions/listen streams that the tool or prompt list changed.
function changeHooks(server) {
  server.registerTool("test_trigger_tool_change", { description: "Announces a change of the tool list" }, async () => {
    modern.notify.toolsChanged();
    return text("Tool list changed");
  });
  server.registerTool("test_trigger_prompt_change", { description: "Announces a change of the prompt list" }, async () => {
    modern.notify.promptsChanged();
    return text("Prompt list changed");
  });
}

function tools(server) {
  // SEP-1699 polling: on the handshake path (the only one with SSE event
  // ids) the stream closes before the answer, and the client resumes it
  // with GET + Last-Event-ID to get the answer.
  server.registerTool(
    "test_reconnection",
    { description: "Closes its SSE stream before it answers, so the client resumes it" },
    async (ctx) => {
      ctx.http?.closeSSE?.();
      await sleep(200);
      return text("Reconnection test completed successfully");
    },
  );
  server.registerTool("test_simple_text", { description: "Answers with one fixed line of text" }, async () =>
    text("This is a simple text response for testing."),
  );
  server.registerTool("test_image_content", { description: "Answers with a tiny PNG" }, async () => ({
    content: [{ type: "image", data: PNG, mimeType: "image/png" }],
  }));
  server.registerTool("test_audio_content", { description: "Answers with a tiny WAV" }, async () => ({
    content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }],
  }));
  server.registerTool("test_embedded_resource", { description: "Answers with an embedded text resource" }, async () => ({
    content: [
      {
        type: "resource",
        resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
      },
    ],
  }));
  server.registerTool("test_multiple_content_types", { description: "Answers with text, an image and a resource" }, async () => ({
    content: [
      { type: "text", text: "Multiple content types test:" },
      { type: "image", data: PNG, mimeType: "image/png" },
      {
        type: "resource",
        resource: {
          uri: "test://mixed-content-resource",
          mimeType: "application/json",
          text: JSON.stringify({ test: "data", value: 123 }),
        },
      },
    ],
  }));
  server.registerTool(
    "test_tool_with_logging",
    { description: "Logs three lines while it runs", inputSchema: z.object({}) },
    async (_args, ctx) => {
      for (const line of ["Tool execution started", "Tool processing data", "Tool execution completed"]) {
        await ctx.mcpReq.log("info", line);
        await sleep(20);
      }
      return text("Logging tool finished");
    },
  );
  server.registerTool(
    "test_tool_with_progress",
    { description: "Reports progress in three steps", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (progressToken !== undefined) {
          await ctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken, progress, total: 100 } });
        }
        await sleep(20);
      }
      return text("Progress tool finished");
    },
  );
  server.registerTool("test_error_handling", { description: "Always fails as a tool error" }, async () => ({
    isError: true,
    content: [{ type: "text", text: "This tool intentionally returns an error for testing" }],
  }));
  server.registerTool(
    "test_sampling",
    { description: "Asks the client's model", inputSchema: z.object({ prompt: z.string().describe("what to ask") }) },
    async ({ prompt }, ctx) => {
      const answer = await ctx.mcpReq.send({
        method: "sampling/createMessage",
        params: { messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 },
      });
      return text(`LLM response: ${answer?.content?.text ?? "(none)"}`);
    },
  );
  server.registerTool(
    "test_elicitation",
    { description: "Asks the user for a name and an email", inputSchema: z.object({ message: z.string().describe("what to ask") }) },
    async ({ message }, ctx) => {
      const answer = await ctx.mcpReq.send({
        method: "elicitation/create",
        params: {
          message,
          requestedSchema: {
            type: "object",
            properties: { username: { type: "string" }, email: { type: "string" } },
            required: ["username", "email"],
          },
        },
      });
      return text(`User response: ${answer.action} ${JSON.stringify(answer.content ?? {})}`);
    },
  );
  server.registerTool(
    "test_elicitation_sep1034_defaults",
    { description: "Asks the user with defaults for each primitive type", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const answer = await ctx.mcpReq.send({
        method: "elicitation/create",
        params: {
          message: "Confirm or change the defaults",
          requestedSchema: {
            type: "object",
            properties: {
              name: { type: "string", default: "John Doe" },
              age: { type: "integer", default: 30 },
              score: { type: "number", default: 95.5 },
              status: { type: "string", enum: ["active", "inactive", "pending"], default: "active" },
              verified: { type: "boolean", default: true },
            },
          },
        },
      });
      return text(`Defaults confirmed: ${answer.action}`);
    },
  );
  server.registerTool(
    "test_elicitation_sep1330_enums",
    { description: "Asks the user to pick from enums of each shape", inputSchema: z.object({}) },
    async (_args, ctx) => {
      const answer = await ctx.mcpReq.send({
        method: "elicitation/create",
        params: {
          message: "Pick your options",
          requestedSchema: {
            type: "object",
            properties: {
              untitledSingle: { type: "string", enum: ["a", "b", "c"] },
              titledSingle: {
                type: "string",
                oneOf: [
                  { const: "x", title: "Ex" },
                  { const: "y", title: "Why" },
                ],
              },
              legacyEnum: { type: "string", enum: ["p", "q"], enumNames: ["Pea", "Queue"] },
              untitledMulti: { type: "array", items: { type: "string", enum: ["one", "two"] } },
              titledMulti: {
                type: "array",
                items: {
                  anyOf: [
                    { const: "red", title: "Red" },
                    { const: "blue", title: "Blue" },
                  ],
                },
              },
            },
          },
        },
      });
      return text(`Enums picked: ${answer.action}`);
    },
  );
  server.registerTool(
    "json_schema_2020_12_tool",
    {
      description: "Takes input described in JSON Schema 2020-12",
      inputSchema: fromJsonSchema({
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        $defs: {
          address: {
            $anchor: "address",
            type: "object",
            properties: { street: { type: "string" }, city: { type: "string" } },
          },
        },
        properties: {
          name: { type: "string" },
          address: { $ref: "#/$defs/address" },
          contact: { anyOf: [{ type: "string", format: "email" }, { type: "string", pattern: "^\\+[0-9]+$" }] },
          kind: { type: "string", enum: ["person", "company"] },
        },
        allOf: [{ required: ["name"] }, { anyOf: [{ required: ["contact"] }, { required: ["address"] }] }],
        if: { properties: { kind: { const: "company" } } },
        then: { required: ["address"] },
        else: { required: [] },
        additionalProperties: false,
      }),
    },
    async () => text("Schema tool called"),
  );
}

function prompts(server) {
  server.registerPrompt("test_simple_prompt", { description: "A prompt with no arguments" }, async () => ({
    messages: [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }],
  }));
  server.registerPrompt(
    "test_prompt_with_arguments",
    {
      description: "A prompt that quotes its arguments",
      argsSchema: z.object({
        arg1: completable(z.string(), (value) => ["test", "testing", "tested"].filter((v) => v.startsWith(value))),
        arg2: z.string(),
      }),
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
    }),
  );
  server.registerPrompt(
    "test_prompt_with_embedded_resource",
    { description: "A prompt that embeds a resource", argsSchema: z.object({ resourceUri: z.string() }) },
    async ({ resourceUri }) => ({
      messages: [
        { role: "user", content: { type: "resource", resource: { uri: resourceUri, mimeType: "text/plain", text: "Embedded text." } } },
        { role: "user", content: { type: "text", text: "Use the resource above." } },
      ],
    }),
  );
  server.registerPrompt("test_prompt_with_image", { description: "A prompt with an image" }, async () => ({
    messages: [
      { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
      { role: "user", content: { type: "text", text: "Describe the image." } },
    ],
  }));
}

function resources(server) {
  server.registerResource(
    "static-text",
    "test://static-text",
    { description: "A fixed text resource", mimeType: "text/plain" },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: "text/plain", text: "This is the content of the static text resource." }],
    }),
  );
  server.registerResource(
    "static-binary",
    "test://static-binary",
    { description: "A fixed PNG resource", mimeType: "image/png" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "image/png", blob: PNG }] }),
  );
  server.registerResource(
    "watched-resource",
    "test://watched-resource",
    { description: "A resource clients may subscribe to", mimeType: "text/plain" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: "Watched content" }] }),
  );
  server.registerResource(
    "template",
    new ResourceTemplate("test://template/{id}/data", { list: undefined }),
    { description: "Data by id", mimeType: "application/json" },
    async (uri, { id }) => ({
      contents: [
        { uri: uri.href, mimeType: "application/json", text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) },
      ],
    }),
  );
}

// Checks the protocol asks of a call before any tool runs, answered as
// JSON-RPC errors (a tool's own failure would be an isError result): a
// requestState this process did not sign is refused, and a tool that needs
// a client capability the envelope does not declare is refused with -32021.
function guardToolCalls(server) {
  const dispatch = server.server._getRequestHandler("tools/call");
  server.server._requestHandlers.set("tools/call", async (request, ctx) => {
    if (rawState(ctx) !== undefined) openState(rawState(ctx));
    if (request.params?.name === "test_missing_capability" && !envelope(ctx, CLIENT_CAPABILITIES)?.sampling) {
      throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { sampling: {} } });
    }
    return dispatch(request, ctx);
  });
}

function fixture() {
  const server = new McpServer(
    { name: "mcp-tape-conformance-fixture", version: "2.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        prompts: { listChanged: true },
        resources: { subscribe: true },
        logging: {},
        completions: {},
      },
    },
  );
  tools(server);
  prompts(server);
  resources(server);
  inputRequiredTools(server);
  statelessDiagnostics(server);
  changeHooks(server);
  guardToolCalls(server);
  return server;
}

// Each handshake session's SSE events, so a client can resume a stream
// (GET + Last-Event-ID); ids are `{stream}_{n}`. Priming events are stored
// as `{}` and never sent again.
class SessionEvents {
  constructor() {
    this.events = new Map();
    this.count = 0;
  }
  async storeEvent(streamId, message) {
    const id = `${streamId}_${++this.count}`;
    this.events.set(id, { streamId, message });
    return id;
  }
  async getStreamIdForEventId(eventId) {
    return this.events.get(eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const last = this.events.get(lastEventId);
    if (!last) throw new Error(`no event ${lastEventId}`);
    let after = false;
    for (const [id, { streamId, message }] of this.events) {
      if (after && streamId === last.streamId && Object.keys(message).length > 0) await send(id, message);
      after ||= id === lastEventId;
    }
    return last.streamId;
  }
}
// How long a client waits before it resumes a closed stream.
const RETRY_MS = 500;

const modern = createMcpHandler(() => fixture(), { legacy: "reject" });
const sessions = new Map();

async function legacy(request) {
  const session = request.headers.get("mcp-session-id");
  if (session) {
    const transport = sessions.get(session);
    if (!transport) {
      return Response.json(
        { jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } },
        { status: 404 },
      );
    }
    return transport.handleRequest(request);
  }
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore: new SessionEvents(),
    retryInterval: RETRY_MS,
    onsessioninitialized: (id) => sessions.set(id, transport),
    onsessionclosed: (id) => sessions.delete(id),
  });
  const server = fixture();
  // Subscriptions are the handshake era's (2026-07-28 replaced them).
  for (const method of ["resources/subscribe", "resources/unsubscribe"]) {
    server.server.setRequestHandler(method, async () => ({}));
  }
  await server.connect(transport);
  return transport.handleRequest(request);
}

const handler = toNodeHandler({
  fetch: async (request) => ((await isLegacyRequest(request.clone())) ? legacy(request) : modern.fetch(request)),
});
const validHost = localhostHostValidation();
const validOrigin = localhostOriginValidation();
const http = createServer((req, res) => {
  if (!validHost(req, res) || !validOrigin(req, res)) return;
  handler(req, res);
});
listenOnLoopback(http, "conformance fixture");
