// The official TypeScript MCP SDK (v1) calling each tool of failing_upstream.py once, in one
// session, directly or against mcp-tape replay with faults.toml; prints each step's outcome as the
// SDK reports it (a result, an McpError's code, a StreamableHTTPError's status, or what else it
// threw), as JSON. Usage: node ts_faults_client.mjs URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const [url] = process.argv.slice(2);
const STEPS = ["ok", "rpc_error", "tool_error", "rate_limited", "unavailable", "cut", "slow", "forget", "ok"];
const STEP_TIMEOUT_MS = 2000;

const client = new Client({ name: "mcp-tape-interop", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const transcript = [];
for (const name of STEPS) {
  const progress = [];
  const step = { tool: name };
  try {
    const result = await client.callTool({ name, arguments: {} }, undefined, {
      timeout: STEP_TIMEOUT_MS,
      onprogress: (p) => progress.push(p.progress),
    });
    step.isError = Boolean(result.isError);
    step.content = result.content.map((block) => block.text);
  } catch (error) {
    if (error instanceof McpError) {
      step.error = error.code;
      if (name === "rpc_error") step.message = error.message;
    } else if (error instanceof StreamableHTTPError) {
      step.http = error.code;
    } else {
      step.raised = error?.constructor?.name ?? String(error);
    }
  }
  step.progress = progress;
  transcript.push(step);
}
try {
  await client.close();
} catch (error) {
  transcript.push({ closed: error?.constructor?.name ?? String(error) });
}
console.log(JSON.stringify(transcript));
