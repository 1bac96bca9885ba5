// The official TypeScript MCP SDK, v1 (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client,
// legacy or auto negotiation), calling each tool of failing_upstream.py once, in one session, directly
// or against mcp-tape replay with faults.toml. Prints each step's outcome as the SDK reports it: a
// result, or the class and code of what it threw (an McpError's JSON-RPC code, a StreamableHTTPError's
// HTTP status, v2's SdkHttpError with its status, a timeout), as JSON.
// Usage: node ts_faults_client.mjs URL v1|legacy|auto
import { connect } from "./ts_sdk.mjs";

const [url, sdk] = process.argv.slice(2);
const STEPS = ["ok", "rpc_error", "tool_error", "rate_limited", "unavailable", "cut", "slow", "forget", "ok"];
const STEP_TIMEOUT_MS = 2000;

const client = await connect(url, sdk, "mcp-tape-interop");
const transcript = [];
for (const name of STEPS) {
  const progress = [];
  const step = { tool: name };
  try {
    const options = { timeout: STEP_TIMEOUT_MS, onprogress: (p) => progress.push(p.progress) };
    const result = sdk === "v1"
      ? await client.callTool({ name, arguments: {} }, undefined, options)
      : await client.callTool({ name, arguments: {} }, options);
    step.isError = Boolean(result.isError);
    step.content = result.content.map((block) => block.text);
  } catch (error) {
    step.raised = error?.constructor?.name ?? String(error);
    step.code = error?.code ?? null;
    if (error?.status !== undefined) step.status = error.status; // v2's SdkHttpError
    if (name === "rpc_error") step.message = error.message;
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
