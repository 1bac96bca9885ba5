// The four-step agent of frameworks_agents.py on the Vercel AI SDK 6 with its real OpenAI provider
// (@ai-sdk/openai, Chat Completions, streamed with streamText), for models.py: the model is
// whatever answers at MODEL_URL, the tools an MCP server's (@ai-sdk/mcp).
//
//     node models_agent.mjs MCP_URL MODEL_URL KEY SYSTEM
//
// Prints, as JSON, the tool calls the model made (name, arguments), each tool result's output as
// the prompt holds it, and the final text; or the error the stream ended on.
import { createMCPClient } from "@ai-sdk/mcp";
import { createOpenAI } from "@ai-sdk/openai";
import { stepCountIs, streamText } from "ai";

const [mcpUrl, baseURL, apiKey, system] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey });
const errors = [];
const client = await createMCPClient({ transport: { type: "http", url: mcpUrl } });
try {
  const tools = await client.tools();
  const result = streamText({
    model: openai.chat("gpt-test"),
    system,
    tools,
    prompt: "Plan a review with Bob from my newest mail.",
    stopWhen: stepCountIs(6),
    maxRetries: 0,
    onError: ({ error }) => errors.push(error),
  });
  let output = "";
  for await (const part of result.fullStream) {
    if (part.type === "text-delta") output += part.text;
  }
  if (errors.length > 0) {
    const error = errors[0];
    process.stdout.write(JSON.stringify({ error: `${error.name}: ${error.message} ${error.responseBody ?? ""}` }));
  } else {
    const steps = await result.steps;
    const calls = steps.flatMap((step) => step.toolCalls.map((call) => [call.toolName, call.input]));
    const results = steps.flatMap((step) => step.toolResults.map((r) => JSON.stringify(r.output)));
    process.stdout.write(JSON.stringify({ calls, results, output }));
  }
} finally {
  await client.close();
}
