"""A served agent thinking with the official Python MCP client's model (sampling).

Usage: mcp_agent_sampling.py <tavern-binary> <home>

Runs `tavern --home <home> mcp --llm mcp-client`, answers every `sampling/createMessage` from
a list of replies (the first calls `system:echo`), calls the tool `agent_helper` and checks
that the agent ran the tool and answered. The last line is `OK <n> checks`.
"""

import asyncio
import sys

import mcp_types as types
from mcp import Client, StdioServerParameters

CHECKS = 0


def check(cond, what, got=None):
    global CHECKS
    CHECKS += 1
    if not cond:
        print(f"FAIL: {what}" + (f" (got {got!r})" if got is not None else ""), flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


REPLIES = [
    "I will echo it.\n<ACTION>\n  <system:echo>\n    <text>marigold-7</text>\n  </system:echo>\n</ACTION>",
    "Done: the echo said marigold-7.",
]


async def main(binary, home):
    asked = []

    async def sampling(context, params):
        asked.append(params)
        text = REPLIES[min(len(asked), len(REPLIES)) - 1]
        return types.CreateMessageResult.model_validate(
            {"role": "assistant", "content": {"type": "text", "text": text},
             "model": "python-client", "stopReason": "endTurn"})

    params = StdioServerParameters(command=binary, args=["--home", home, "mcp", "--llm", "mcp-client"])
    async with Client(params, sampling_callback=sampling) as client:
        tools = await client.list_tools()
        check(any(t.name == "agent_helper" for t in tools.tools), "agent_helper is listed",
              [t.name for t in tools.tools])
        r = await client.call_tool("agent_helper", {"message": "Echo the word marigold"})
        check(not r.is_error, "the agent's run is not an error", r)
        check(len(asked) == 2, "the client's model was asked twice (a call, then the answer)", len(asked))
        second = " ".join(getattr(m.content, "text", "") for m in asked[1].messages)
        check("marigold-7" in second, "the second request carries the tool's Observation", second)
        s = r.structured_content or {}
        check(s.get("answer") == "Done: the echo said marigold-7.", "the answer is the last reply", s)
        calls = s.get("calls") or [{}]
        check(calls[0].get("tool") == "system:echo" and calls[0].get("ok") is True,
              "the agent ran system:echo", calls)
    print(f"OK {CHECKS} checks", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
