"""The official Python MCP client against several `tavern serve --store` replicas behind a
round-robin proxy that sends every HTTP request to the next replica (no stickiness).

Usage:
  mcp_replicas.py <url> legacy        # 2025 revisions: initialize, then a session id
  mcp_replicas.py <url> 2026-07-28    # the stateless revision, adopted directly

Every request opens its own connection (no keep-alive), so consecutive requests reach
different replicas. Every check prints one line; the last line is `OK <n> checks`.
"""

import asyncio
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CHECKS = 0


def check(cond, what, got=None):
    global CHECKS
    CHECKS += 1
    if not cond:
        print(f"FAIL: {what}" + (f" (got {got!r})" if got is not None else ""), flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def run(url, mode):
    http = httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0), timeout=60)
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode=mode) as client:
        if mode == "legacy":
            check(client.protocol_version.startswith("2025-"), "a 2025 revision was negotiated", client.protocol_version)
        else:
            check(client.protocol_version == mode, f"the client speaks {mode}", client.protocol_version)
        tools = (await client.list_tools()).tools
        names = {t.name for t in tools}
        check("LuaDemo_shout" in names, "tools/list answers through the proxy", sorted(names))
        for i in range(6):
            r = await client.call_tool("LuaDemo_shout", {"text": f"hi {i}"})
            check(not r.is_error and text_of(r) == f"HI {i}!", f"call {i} answers on whichever replica it reached", text_of(r))
        r = await client.call_tool("RhaiDemo_add", {"a": 2, "b": 40})
        check(text_of(r) == "42", "a Rhai tool answers", text_of(r))
        r = await client.call_tool("workflow_slow_echo", {"text": "late", "ms": 300})
        check(text_of(r) == "late", "a slow workflow answers", text_of(r))
    await http.aclose()


def main():
    asyncio.run(run(sys.argv[1], sys.argv[2]))
    print(f"OK {CHECKS} checks", flush=True)


if __name__ == "__main__":
    main()
