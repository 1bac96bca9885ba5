// A conformance fixture upstream of our own, on the official TypeScript SDK's low-level Server:
// every tool, prompt and resource the conformance suite 0.1.16 asks servers for
// (shared/reference/CONFORMANCE.md §3), with the texts and shapes the scenarios check. The SDK
// (1.32.2) serves the handshake era only. Sessions over Streamable HTTP with an in-memory event
// store (for the SSE polling scenario); requests naming a non-loopback Host or Origin get 403.
//
// Usage: node conformance_upstream.mjs    (prints "listening on http://127.0.0.1:PORT")
import http from "node:http";
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { listenOnLoopback, readJson, refuse } from "./http_server.mjs";

// A 1x1 PNG and a 4-sample 8 kHz mono WAV, both made here.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
function wav() {
  const samples = Buffer.from([0, 0, 0, 0, 0, 0, 0, 0]);
  const header = Buffer.alloc(44);
  header.write("RIFF", 0);
  header.writeUInt32LE(36 + samples.length, 4);
  header.write("WAVEfmt ", 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(8000, 24);
  header.writeUInt32LE(16000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36);
  header.writeUInt32LE(samples.length, 40);
  return Buffer.concat([header, samples]).toString("base64");
}
const WAV = wav();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ type: "text", text: t });
const noArguments = { type: "object", properties: {}, additionalProperties: false };

const TOOLS = [
  ["test_simple_text", "Answers with one text block.", noArguments],
  ["test_image_content", "Answers with one PNG image.", noArguments],
  ["test_audio_content", "Answers with one WAV clip.", noArguments],
  ["test_embedded_resource", "Answers with an embedded text resource.", noArguments],
  ["test_multiple_content_types", "Answers with text, an image and an embedded resource.", noArguments],
  ["test_tool_with_logging", "Logs three messages while it runs.", noArguments],
  ["test_error_handling", "Always fails, as a tool error result.", noArguments],
  ["test_tool_with_progress", "Reports progress three times while it runs.", noArguments],
  [
    "test_sampling",
    "Asks the client's model to answer a prompt.",
    { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] },
  ],
  [
    "test_elicitation",
    "Asks the user for a user name and an email address.",
    { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
  ],
  ["test_elicitation_sep1034_defaults", "Asks the user with defaults for every primitive type.", noArguments],
  ["test_elicitation_sep1330_enums", "Asks the user with every enum shape.", noArguments],
  ["test_reconnection", "Closes its SSE stream mid-call and answers on the resumed stream.", noArguments],
  [
    "json_schema_2020_12_tool",
    "Tool with JSON Schema 2020-12 features",
    {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } },
      },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false,
    },
  ],
].map(([name, description, inputSchema]) => ({ name, description, inputSchema }));

const STATIC_TEXT = "This is the content of the static text resource.";
const RESOURCES = [
  { uri: "test://static-text", name: "static-text", description: "A text resource.", mimeType: "text/plain" },
  { uri: "test://static-binary", name: "static-binary", description: "A PNG resource.", mimeType: "image/png" },
  { uri: "test://watched-resource", name: "watched-resource", description: "Subscribe to it.", mimeType: "text/plain" },
];

const PROMPTS = [
  { name: "test_simple_prompt", description: "A prompt with no arguments." },
  {
    name: "test_prompt_with_arguments",
    description: "A prompt that repeats its two arguments.",
    arguments: [
      { name: "arg1", description: "The first argument.", required: true },
      { name: "arg2", description: "The second argument.", required: true },
    ],
  },
  {
    name: "test_prompt_with_embedded_resource",
    description: "A prompt that embeds a resource.",
    arguments: [{ name: "resourceUri", description: "The resource to embed.", required: true }],
  },
  { name: "test_prompt_with_image", description: "A prompt with an image." },
];

async function callTool(server, request, extra) {
  const { name, arguments: args = {} } = request.params;
  const log = async (data) => {
    if (!server.isMessageIgnored("info", extra.sessionId)) {
      await extra.sendNotification({ method: "notifications/message", params: { level: "info", logger: "fixture", data } });
    }
  };
  const ask = (params) => extra.sendRequest({ method: "elicitation/create", params }, ElicitResultSchema);
  const askedWith = (result) => text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
  switch (name) {
    case "test_simple_text":
      return { content: [text("This is a simple text response for testing.")] };
    case "test_image_content":
      return { content: [{ type: "image", data: PNG, mimeType: "image/png" }] };
    case "test_audio_content":
      return { content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] };
    case "test_embedded_resource":
      return {
        content: [
          {
            type: "resource",
            resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
          },
        ],
      };
    case "test_multiple_content_types":
      return {
        content: [
          text("Multiple content types test:"),
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
      };
    case "test_tool_with_logging":
      await log("Tool execution started");
      await sleep(50);
      await log("Tool processing data");
      await sleep(50);
      await log("Tool execution completed");
      return { content: [text("Tool with logging executed successfully")] };
    case "test_error_handling":
      return { isError: true, content: [text("This tool intentionally returns an error for testing")] };
    case "test_tool_with_progress": {
      const progressToken = request.params._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (progressToken !== undefined) {
          await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress, total: 100 } });
        }
        if (progress < 100) await sleep(50);
      }
      return { content: [text("Tool with progress completed")] };
    }
    case "test_sampling": {
      const result = await extra.sendRequest(
        {
          method: "sampling/createMessage",
          params: { messages: [{ role: "user", content: text(args.prompt) }], maxTokens: 100 },
        },
        CreateMessageResultSchema,
      );
      return { content: [text(`LLM response: ${result.content?.text ?? ""}`)] };
    }
    case "test_elicitation": {
      const result = await ask({
        message: args.message,
        requestedSchema: {
          type: "object",
          properties: {
            username: { type: "string", description: "Your user name" },
            email: { type: "string", description: "Your email address" },
          },
          required: ["username", "email"],
        },
      });
      return { content: [text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)] };
    }
    case "test_elicitation_sep1034_defaults":
      return {
        content: [
          askedWith(
            await ask({
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
            }),
          ),
        ],
      };
    case "test_elicitation_sep1330_enums":
      return {
        content: [
          askedWith(
            await ask({
              message: "Pick from each list",
              requestedSchema: {
                type: "object",
                properties: {
                  untitledSingle: { type: "string", enum: ["option1", "option2", "option3"] },
                  titledSingle: {
                    type: "string",
                    oneOf: [
                      { const: "value1", title: "First Option" },
                      { const: "value2", title: "Second Option" },
                      { const: "value3", title: "Third Option" },
                    ],
                  },
                  legacyEnum: {
                    type: "string",
                    enum: ["opt1", "opt2", "opt3"],
                    enumNames: ["Option One", "Option Two", "Option Three"],
                  },
                  untitledMulti: { type: "array", items: { type: "string", enum: ["option1", "option2", "option3"] } },
                  titledMulti: {
                    type: "array",
                    items: {
                      anyOf: [
                        { const: "value1", title: "First Choice" },
                        { const: "value2", title: "Second Choice" },
                        { const: "value3", title: "Third Choice" },
                      ],
                    },
                  },
                },
              },
            }),
          ),
        ],
      };
    case "test_reconnection":
      extra.closeSSEStream?.();
      await sleep(100);
      return { content: [text("Reconnection test completed")] };
    case "json_schema_2020_12_tool":
      return { content: [text(`Hello, ${args.name ?? "nobody"}`)] };
    default:
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
  }
}

function readResource(uri) {
  if (uri === "test://static-text") return [{ uri, mimeType: "text/plain", text: STATIC_TEXT }];
  if (uri === "test://static-binary") return [{ uri, mimeType: "image/png", blob: PNG }];
  if (uri === "test://watched-resource") return [{ uri, mimeType: "text/plain", text: "Watched." }];
  const templated = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (templated) {
    const id = templated[1];
    return [{ uri, mimeType: "application/json", text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }];
  }
  throw new McpError(-32002, `Resource not found: ${uri}`, { uri });
}

function getPrompt({ name, arguments: args = {} }) {
  const user = (content) => ({ messages: [{ role: "user", content }] });
  switch (name) {
    case "test_simple_prompt":
      return user(text("This is a simple prompt for testing."));
    case "test_prompt_with_arguments":
      return user(text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`));
    case "test_prompt_with_embedded_resource":
      return {
        messages: [
          { role: "user", content: { type: "resource", resource: { uri: args.resourceUri, mimeType: "text/plain", text: STATIC_TEXT } } },
          { role: "user", content: text("Please use the resource above.") },
        ],
      };
    case "test_prompt_with_image":
      return {
        messages: [
          { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
          { role: "user", content: text("Please describe the image above.") },
        ],
      };
    default:
      throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${name}`);
  }
}

function makeServer() {
  const server = new Server(
    { name: "mcp-tape-conformance-fixture", version: "1.0.0" },
    {
      capabilities: {
        tools: {},
        prompts: {},
        resources: { subscribe: true },
        logging: {},
        completions: {},
      },
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => callTool(server, request, extra));
  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: RESOURCES }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      { uriTemplate: "test://template/{id}/data", name: "template", description: "Data by id.", mimeType: "application/json" },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, (request) => ({ contents: readResource(request.params.uri) }));
  server.setRequestHandler(SubscribeRequestSchema, () => ({}));
  server.setRequestHandler(UnsubscribeRequestSchema, () => ({}));
  server.setRequestHandler(ListPromptsRequestSchema, () => ({ prompts: PROMPTS }));
  server.setRequestHandler(GetPromptRequestSchema, (request) => getPrompt(request.params));
  server.setRequestHandler(CompleteRequestSchema, (request) => {
    const value = request.params.argument.value ?? "";
    const values = ["test", "testing", "tested"].filter((v) => v.startsWith(value));
    return { completion: { values, total: values.length, hasMore: false } };
  });
  return server;
}

/** Events kept per session so that a client can resume a stream with Last-Event-ID. */
class MemoryEventStore {
  events = [];
  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${this.events.length}`;
    this.events.push({ eventId, streamId, message });
    return eventId;
  }
  async getStreamIdForEventId(eventId) {
    return this.events.find((e) => e.eventId === eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const at = this.events.findIndex((e) => e.eventId === lastEventId);
    if (at < 0) return "";
    const { streamId } = this.events[at];
    for (const event of this.events.slice(at + 1).filter((e) => e.streamId === streamId)) {
      await send(event.eventId, event.message);
    }
    return streamId;
  }
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);
const hostOf = (authority) => (authority.startsWith("[") ? authority.slice(0, authority.indexOf("]") + 1) : authority.split(":")[0]);

const sessions = new Map();
const httpServer = http.createServer(async (req, res) => {
  const origin = req.headers.origin;
  if (!LOOPBACK.has(hostOf(req.headers.host ?? "")) || (origin && !LOOPBACK.has(hostOf(new URL(origin).host)))) {
    return refuse(res, 403, -32000, "Forbidden: only loopback hosts are served");
  }
  let body;
  if (req.method === "POST") {
    try {
      body = await readJson(req);
    } catch {
      return refuse(res, 400, -32700, "Parse error");
    }
  }
  const sessionId = req.headers["mcp-session-id"];
  let transport = sessionId ? sessions.get(sessionId) : undefined;
  if (!transport) {
    if (sessionId) return refuse(res, 404, -32001, "Session not found");
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      return refuse(res, 400, -32000, "Bad Request: Server not initialized");
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new MemoryEventStore(),
      retryInterval: 500,
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => sessions.delete(transport.sessionId);
    await makeServer().connect(transport);
  }
  await transport.handleRequest(req, res, body);
});

listenOnLoopback(httpServer);
