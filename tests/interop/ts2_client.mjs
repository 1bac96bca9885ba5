// The official TypeScript MCP SDK v2 client (@modelcontextprotocol/client)
// in the round trip, in one of its version negotiation modes.
// Usage: node ts2_client.mjs BASE MODE TOKEN   (MODE: legacy | auto | 2026-07-28)
// Prints the round-trip transcript as JSON.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { roundTrip } from "./round_trip_flow.mjs";

const [base, mode, token] = process.argv.slice(2);
const versionNegotiation = { mode: mode === "legacy" || mode === "auto" ? mode : { pin: mode } };

const sdk = {
  async connect(target) {
    const client = new Client({ name: "mcp-tape-interop-v2", version: "1.0.0" }, { versionNegotiation });
    const requestInit = { headers: { Authorization: `Bearer ${token}` } };
    await client.connect(new StreamableHTTPClientTransport(new URL(target), { requestInit }));
    return client;
  },
  callTool: (client, params, onprogress) => client.callTool(params, { onprogress }),
};

try {
  process.stdout.write(JSON.stringify(await roundTrip(base, sdk)));
} catch (error) {
  console.error(error);
  process.exit(1);
}
