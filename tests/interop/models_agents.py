"""The four-step agent of frameworks_agents.py on Python agent frameworks
with their real OpenAI providers, for models.py: the model is whatever
answers OpenAI's Chat Completions at MODEL_URL (model_server.py, or
mcp-tape's /model/openai standing for it), the tools an MCP server's.

    python models_agents.py FRAMEWORK MCP_URL MODEL_URL KEY SYSTEM

FRAMEWORK is `pydantic-ai` (OpenAIChatModel through OpenAIProvider,
MCPToolset), `openai-agents` (OpenAIChatCompletionsModel on AsyncOpenAI,
streamed with Runner.run_streamed, MCPServerStreamableHttp; tracing off, so
nothing leaves the machine) or `langchain` (langchain-openai's ChatOpenAI
with langchain-mcp-adapters' tools bound, in a tool-calling loop);
`azure-openai` is the openai SDK's AzureOpenAI
client asking its deployment once (MODEL_URL is the Azure endpoint; one
tool offered, none called). Prints, as JSON, the tool calls the model made (name, arguments),
the text each tool result was handed back as, and the final answer; or what
the framework raised.
"""

import asyncio
import json
import sys

from frameworks_agents import tool_message_text

PROMPT = "Plan a review with Bob from my newest mail."


async def pydantic_ai(mcp_url, model_url, key, system):
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ToolCallPart, ToolReturnPart
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(base_url=model_url, api_key=key))
    agent = Agent(model, system_prompt=system, toolsets=[MCPToolset(mcp_url, max_retries=0)])
    async with agent:
        result = await agent.run(PROMPT)
    calls, results = [], []
    for message in result.all_messages():
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.append([part.tool_name, part.args_as_dict()])
            elif isinstance(part, ToolReturnPart):
                results.append(part.model_response_str())
    return {"calls": calls, "results": results, "output": result.output}


async def openai_agents(mcp_url, model_url, key, system):
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from agents.items import ToolCallItem, ToolCallOutputItem
    from agents.mcp import MCPServerStreamableHttp
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=AsyncOpenAI(base_url=model_url, api_key=key))
    server = MCPServerStreamableHttp({"url": mcp_url}, client_session_timeout_seconds=30)
    async with server:
        agent = Agent(name="planner", instructions=system, model=model, mcp_servers=[server])
        result = Runner.run_streamed(agent, PROMPT, max_turns=8)
        async for _ in result.stream_events():
            pass
    calls, results = [], []
    for item in result.new_items:
        if isinstance(item, ToolCallItem):
            calls.append([item.raw_item.name, json.loads(item.raw_item.arguments)])
        elif isinstance(item, ToolCallOutputItem):
            results.append(item.output if isinstance(item.output, str) else json.dumps(item.output))
    return {"calls": calls, "results": results, "output": result.final_output}


async def langchain(mcp_url, model_url, key, system):
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_openai import ChatOpenAI

    client = MultiServerMCPClient({"mail": {"url": mcp_url, "transport": "streamable_http"}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    model = ChatOpenAI(model="gpt-test", base_url=model_url, api_key=key).bind_tools(list(tools.values()))
    messages = [SystemMessage(system), HumanMessage(PROMPT)]
    calls, results = [], []
    for _ in range(6):
        answer = await model.ainvoke(messages)
        messages.append(answer)
        if not answer.tool_calls:
            return {"calls": calls, "results": results, "output": answer.content}
        for call in answer.tool_calls:
            calls.append([call["name"], call["args"]])
            message = await tools[call["name"]].ainvoke({**call, "type": "tool_call"})
            assert isinstance(message, ToolMessage), message
            results.append(tool_message_text(message))
            messages.append(message)
    return {"calls": calls, "results": results, "output": None}


async def azure_openai(_mcp_url, endpoint, key, system):
    from openai import AsyncAzureOpenAI

    client = AsyncAzureOpenAI(azure_endpoint=endpoint, api_key=key, api_version="2024-10-21")
    tool = {"type": "function", "function": {"name": "list_messages", "parameters": {
        "type": "object", "properties": {"folder": {"type": "string"}, "top": {"type": "integer"}}}}}
    answer = await client.chat.completions.create(
        model="planner-deployment", tools=[tool],
        messages=[{"role": "system", "content": system}, {"role": "user", "content": PROMPT}])
    message = answer.choices[0].message
    calls = [[call.function.name, json.loads(call.function.arguments)] for call in message.tool_calls or []]
    return {"calls": calls, "results": [], "output": message.content}


FRAMEWORKS = {"pydantic-ai": pydantic_ai, "openai-agents": openai_agents, "langchain": langchain,
              "azure-openai": azure_openai}


def main():
    framework, mcp_url, model_url, key, system = sys.argv[1:6]
    try:
        result = asyncio.run(asyncio.wait_for(FRAMEWORKS[framework](mcp_url, model_url, key, system), 120))
    except Exception as error:  # what the framework raised reaches the agent's code as it is
        causes = []
        while error is not None:
            causes.append(f"{type(error).__name__}: {error}")
            error = error.__cause__ or error.__context__
        result = {"error": " <- ".join(causes)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
