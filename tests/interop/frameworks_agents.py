"""One four-step agent on three Python agent frameworks, each driven by its
own scripted test model (no LLM), for frameworks.py:

    python frameworks_agents.py FRAMEWORK URL PLAN_JSON

FRAMEWORK is `pydantic-ai` (FunctionModel + MCPToolset), `openai-agents`
(agents.testing.ScriptedModel + MCPServerStreamableHttp with structured
content) or `langchain` (langchain-mcp-adapters' tools in a tool-calling
loop). The agent lists messages, creates an event from the first subject,
sends an invite, and answers; PLAN_JSON says with which arguments (the
"model" of a varied run writes them otherwise). Prints, as JSON, what the
framework handed its model after each tool call (the very text), or what it
raised to the agent's code.
"""

import asyncio
import json
import sys

ANSWER = "Invited Bob to the review."


def calls(plan):
    """The three tool calls the model makes, in order, with their arguments."""
    return [
        ("list_messages", {"folder": plan["folder"], "top": plan["top"]}),
        ("create_event", {"subject": plan["subject"], "start": plan["start"]}),
        ("send_invite", {"eventId": plan["eventId"], "to": plan["to"], "body": plan["body"]}),
    ]


async def pydantic_ai(url, plan):
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    script = calls(plan)
    seen = []

    def model(messages, _info):
        # What the model is handed: the text of each tool's return (or of the retry prompt).
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                seen.append(part.model_response_str())
            elif isinstance(part, RetryPromptPart):
                seen.append(part.model_response())
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        if step < len(script):
            name, arguments = script[step]
            return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=f"call-{step}")])
        return ModelResponse(parts=[TextPart(ANSWER)])

    agent = Agent(FunctionModel(model), toolsets=[MCPToolset(url, max_retries=0, tool_error_behavior="failed")])
    async with agent:
        result = await agent.run("Plan a review with Bob from my newest mail.")
    return {"seen": seen, "output": result.output}


async def openai_agents(url, plan):
    from agents import Agent, Runner
    from agents.mcp import MCPServerStreamableHttp
    from agents.testing import ScriptedModel, assistant_message, function_call

    steps = [[function_call(name, arguments, call_id=f"call-{i}")] for i, (name, arguments) in enumerate(calls(plan))]
    model = ScriptedModel([*steps, [assistant_message(ANSWER)]])
    server = MCPServerStreamableHttp({"url": url}, use_structured_content=True, client_session_timeout_seconds=30)
    async with server:
        agent = Agent(name="planner", model=model, mcp_servers=[server])
        result = await Runner.run(agent, "Plan a review with Bob from my newest mail.", max_turns=8)
    seen = []
    for call in model.calls:
        items = call.input if isinstance(call.input, list) else []
        outputs = [item for item in items if isinstance(item, dict) and item.get("type") == "function_call_output"]
        if len(outputs) > len(seen):
            output = outputs[-1]["output"]
            seen.append(output if isinstance(output, str) else json.dumps(output))
    return {"seen": seen, "output": result.final_output}


async def langchain(url, plan):
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"mail": {"url": url, "transport": "streamable_http"}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    seen = []
    for i, (name, arguments) in enumerate(calls(plan)):
        ask = AIMessage(content="", tool_calls=[{"name": name, "args": arguments, "id": f"call-{i}"}])
        call = ask.tool_calls[0]
        try:
            message = await tools[name].ainvoke({**call, "type": "tool_call"})
        except Exception as error:  # what the adapter raises reaches the agent's code as it is
            seen.append(f"raised {type(error).__name__}: {error}")
            continue
        assert isinstance(message, ToolMessage), message
        seen.append(tool_message_text(message))
    return {"seen": seen, "output": ANSWER}


def tool_message_text(message):
    """A LangChain tool message's content as the text its model is handed, without the id each content block
    carries (new on every run)."""
    content = message.content
    if isinstance(content, list):
        content = [{k: v for k, v in block.items() if k != "id"} if isinstance(block, dict) else block
                   for block in content]
    return content if isinstance(content, str) else json.dumps(content)


FRAMEWORKS = {"pydantic-ai": pydantic_ai, "openai-agents": openai_agents, "langchain": langchain}


def main():
    framework, url, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    result = asyncio.run(asyncio.wait_for(FRAMEWORKS[framework](url, plan), 120))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
