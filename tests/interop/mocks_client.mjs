// The official TypeScript SDK, v1 (@modelcontextprotocol/sdk) or v2
// (@modelcontextprotocol/client, legacy or auto negotiation), as a client
// of answer templates imported from Agent 365 mocks.
// Usage: node mocks_client.mjs URL v1|legacy|auto CALLS_JSON
// CALLS_JSON: [[tool, arguments], ...]. Prints {tools, calls} as JSON: the
// listed tools (name, description, inputSchema, extra keys) and each
// call's text, or its error code.
import { connect } from "./ts_sdk.mjs";

const [url, sdk, callsJson] = process.argv.slice(2);

try {
  const client = await connect(url, sdk, "mcp-tape-mocks");
  const tools = (await client.listTools()).tools.map(({ name, description, inputSchema, ...rest }) => ({
    name,
    description,
    inputSchema,
    extra: Object.keys(rest).filter((key) => ["responseTemplate", "placeholders"].includes(key)),
  }));
  const calls = [];
  for (const [name, args] of JSON.parse(callsJson)) {
    try {
      const result = await client.callTool({ name, arguments: args });
      calls.push(result.isError ? { isError: true } : { text: result.content[0].text });
    } catch (error) {
      calls.push({ code: error.code });
    }
  }
  await client.close();
  process.stdout.write(JSON.stringify({ tools, calls }));
} catch (error) {
  console.error(error);
  process.exit(1);
}
