// The round trip every TypeScript SDK generation runs: one flow over every
// server of agent365_upstream.py, each step's outcome in a transcript (runs
// directly, through `mcp-tape record` and against `mcp-tape replay` must give
// equal transcripts). Keys the fixture makes volatile on purpose are dropped.
// `sdk` adapts the client generation: connect(url) and callTool(client,
// params, onprogress).

const VOLATILE_KEYS = new Set(["currentDateTime", "sentDateTime"]);

function stable(value) {
  if (Array.isArray(value)) return value.map(stable);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .filter((k) => !VOLATILE_KEYS.has(k))
        .map((k) => [k, stable(value[k])]),
    );
  }
  return value;
}

function textOf(block) {
  try {
    return stable(JSON.parse(block.text));
  } catch {
    return block.text;
  }
}

export async function roundTrip(base, sdk) {
  const transcript = [];
  const note = (server, step, value) => transcript.push([server, step, value]);
  const call = async (client, server, name, args) => {
    const progress = [];
    const result = await sdk.callTool(client, { name, arguments: args }, (p) => progress.push(p.progress));
    note(server, `call ${name} ${JSON.stringify(stable(args))}`, {
      isError: Boolean(result.isError),
      content: result.content.map(textOf),
      meta: stable(result._meta ?? null),
    });
    if (progress.length) note(server, `progress ${name}`, progress);
  };
  const session = async (server, steps) => {
    if (sdk.only && !sdk.only.includes(server)) return;
    const client = await sdk.connect(`${base}/agents/servers/${server}`);
    await steps(client);
    await client.close();
  };
  await session("mcp_MailTools", async (c) => {
    const tools = (await c.listTools()).tools.map((t) => [t.name, JSON.stringify(stable(t.inputSchema))]);
    note("mcp_MailTools", "tools", tools.sort());
    await call(c, "mcp_MailTools", "SearchMessages", { message: "invoice from Fabrikam" });
    await call(c, "mcp_MailTools", "GetMessage", { id: "AAMkAGI2TG93AAA=", bodyPreviewOnly: true });
    await call(c, "mcp_MailTools", "GetMessage", { id: "AAMk-missing" });
    await call(c, "mcp_MailTools", "SendEmailWithAttachments", {
      to: ["adele.vance@contoso.com"],
      subject: "Budget",
      body: "See you Thursday.",
    });
  });
  await session("mcp_CalendarTools", async (c) => {
    note("mcp_CalendarTools", "tools", (await c.listTools()).tools.map((t) => t.name).sort());
    await call(c, "mcp_CalendarTools", "ListEvents", { meetingTitle: "budget" });
    await call(c, "mcp_CalendarTools", "GetUserDateAndTimeZoneSettings", {});
  });
  await session("mcp_MeServer", async (c) => {
    await call(c, "mcp_MeServer", "GetMyDetails", { select: "displayName,jobTitle" });
    await call(c, "mcp_MeServer", "GetManagerDetails", { userId: "me" });
  });
  await session("mcp_KnowledgeTools", async (c) => {
    await call(c, "mcp_KnowledgeTools", "query_federated_knowledge", {
      consumerId: "agent-1",
      query: "How do I use the vpn?",
    });
  });
  await session("mcp_WritingPrompts", async (c) => {
    note("mcp_WritingPrompts", "prompts", (await c.listPrompts()).prompts.map((p) => p.name).sort());
    const prompt = await c.getPrompt({ name: "draft_reply", arguments: { tone: "friendly", points: "thanks; next steps" } });
    note("mcp_WritingPrompts", "get draft_reply", prompt.messages.map((m) => [m.role, m.content.text]));
    const unknown = await c.getPrompt({ name: "no_such_prompt", arguments: {} }).then(
      () => "answered",
      (error) => ({ code: error.code ?? null, message: error.message }),
    );
    note("mcp_WritingPrompts", "get no_such_prompt", unknown);
  });
  await session("mcp_PolicyLibrary", async (c) => {
    note("mcp_PolicyLibrary", "resources", (await c.listResources()).resources.map((r) => r.uri).sort());
    const travel = await c.readResource({ uri: "policy://travel" });
    note("mcp_PolicyLibrary", "read policy://travel", travel.contents.map((x) => x.text));
  });
  return transcript;
}

