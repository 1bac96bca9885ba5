// The official TypeScript MCP SDK client of a given generation, connected over Streamable HTTP:
// v1 (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client) in its `legacy` or `auto`
// version negotiation. Shared by the interop drivers that run every generation.
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from "@modelcontextprotocol/client";

/** A client named `name` of the server at `url`, with SDK `sdk` ("v1", "legacy" or "auto"). */
export async function connect(url, sdk, name) {
  if (sdk === "v1") {
    const client = new ClientV1({ name, version: "1.0.0" });
    await client.connect(new TransportV1(new URL(url)));
    return client;
  }
  const client = new ClientV2({ name, version: "1.0.0" }, { versionNegotiation: { mode: sdk } });
  await client.connect(new TransportV2(new URL(url)));
  return client;
}
