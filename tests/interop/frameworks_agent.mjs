// The four-step agent of frameworks_agents.py on the Vercel AI SDK 6: @ai-sdk/mcp's client for the
// tools, generateText driven by MockLanguageModelV3 (no LLM) as the model.
//
//     node frameworks_agent.mjs URL PLAN_JSON
//
// Prints, as JSON, what the SDK handed the model after each tool call (each tool result's output,
// as the prompt holds it) and the run's text.
import { createMCPClient } from "@ai-sdk/mcp";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

const [url, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const ANSWER = "Invited Bob to the review.";
const script = [
  ["list_messages", { folder: plan.folder, top: plan.top }],
  ["create_event", { subject: plan.subject, start: plan.start }],
  ["send_invite", { eventId: plan.eventId, to: plan.to, body: plan.body }],
];
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

const seen = [];
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    const results = prompt.flatMap((message) =>
      message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : [],
    );
    if (results.length > seen.length) seen.push(JSON.stringify(results[results.length - 1].output));
    const step = results.length;
    if (step < script.length) {
      const [toolName, input] = script[step];
      return {
        content: [{ type: "tool-call", toolCallId: `call-${step}`, toolName, input: JSON.stringify(input) }],
        finishReason: { unified: "tool-calls", raw: undefined },
        usage,
        warnings: [],
      };
    }
    return { content: [{ type: "text", text: ANSWER }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
  },
});

const client = await createMCPClient({ transport: { type: "http", url } });
try {
  const tools = await client.tools();
  const result = await generateText({
    model,
    tools,
    prompt: "Plan a review with Bob from my newest mail.",
    stopWhen: stepCountIs(6),
  });
  process.stdout.write(JSON.stringify({ seen, output: result.text }));
} finally {
  await client.close();
}
