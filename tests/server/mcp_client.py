"""Drives a real `tavern` MCP server with the official Python MCP client (`pip install mcp`).

Usage:
  mcp_client.py stdio <tavern-binary> <home>          # tavern mcp over stdin/stdout
  mcp_client.py http <url>                             # tavern serve at <url> (…/mcp)
  mcp_client.py watch <tavern-binary> <home>           # tavern mcp --watch: a new tool file
                                                       # produces tools/list_changed

Every check prints one line; any failed check exits with status 1 and says what was expected.
The last line is `OK <n> checks`.
"""

import asyncio
import json
import sys
from pathlib import Path

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

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


async def all_tools(client):
    tools, cursor, pages = [], None, 0
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass") if cursor else await client.list_tools(cache_mode="bypass")
        pages += 1
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools, pages


async def exercise(client):
    tools, pages = await all_tools(client)
    by_name = {t.name: t for t in tools}
    check(len(by_name) == len(tools), "tool names are unique across pages", [t.name for t in tools])
    check(pages >= 2, "tools/list is paginated (server started with --page-size 3)", pages)
    for name in ["LuaDemo_shout", "RhaiDemo_add", "workflow_text_stats", "txt2img_portrait"]:
        check(name in by_name, f"tools/list has {name}", sorted(by_name))
    shout = by_name["LuaDemo_shout"]
    check(shout.title == "shout", "the title is the display name", shout.title)
    check((shout.meta or {}).get("tavern/id") == "LuaDemo:shout", "_meta carries the canonical id", shout.meta)
    check(shout.input_schema.get("additionalProperties") is False, "closed schemas say additionalProperties: false", shout.input_schema)
    check(shout.annotations is not None and shout.annotations.read_only_hint is True, "annotations come from the tool definition", shout.annotations)

    r = await client.call_tool("LuaDemo_shout", {"text": "hi"})
    check(not r.is_error and text_of(r) == "HI!", "a Lua tool answers", text_of(r))
    r = await client.call_tool("RhaiDemo:add", {"a": 2, "b": 3})
    check(not r.is_error and text_of(r) == "5", "a Rhai tool answers (called by its canonical id)", text_of(r))
    r = await client.call_tool("workflow_text_stats", {"text": "one two\nthree"})
    check(not r.is_error, "a workflow tool answers", text_of(r))
    body = json.loads(text_of(r))
    check(body["stats"]["words"] == 3, "the workflow result is its outputs object", body)
    check({k: v for k, v in r.structured_content.items() if k != "call_id"} == body, "objects also arrive as structuredContent", r.structured_content)
    check(r.structured_content.get("call_id") == "call_0", "structuredContent carries the call's id", r.structured_content)
    r1 = await client.call_tool("txt2img_portrait", {"positive": "a cat"})
    r2 = await client.call_tool("txt2img_portrait", {"positive": "a cat"})
    t1, t2 = text_of(r1), text_of(r2)
    check(not r1.is_error and t1.startswith("portrait: a cat | avoid: blurry, low quality | seed "), "a config-driven tool writes arguments into node inputs", t1)
    check(t1 != t2, "the generated seed is fresh on each call", (t1, t2))
    r = await client.call_tool("txt2img_portrait", {"positive": "a cat", "seed": 42})
    check(text_of(r).endswith("seed 42"), "a given seed is used as is", text_of(r))

    r = await client.call_tool("RhaiDemo_add", {"a": "x", "b": 1})
    check(r.is_error is True, "invalid arguments give isError", r)
    check(text_of(r).startswith("Observation: Error - Invalid parameters for RhaiDemo:add"), "the error text is the Observation line", text_of(r))
    r = await client.call_tool("LuaDemo_fail", {"why": "testing"})
    check(r.is_error is True and "always fails: testing" in text_of(r), "a failing tool gives isError with its message", text_of(r))
    try:
        await client.call_tool("no_such_tool", {})
        check(False, "an unknown tool raises a JSON-RPC error")
    except MCPError as e:
        check(e.code == -32602, "an unknown tool is JSON-RPC error -32602", e.code)

    seen = []

    reports = []

    async def on_progress(progress, total, message):
        seen.append(progress)
        reports.append((progress, total, message))

    r = await client.call_tool("workflow_slow_echo", {"text": "late", "ms": 700}, progress_callback=on_progress)
    check(text_of(r) == "late", "a slow workflow answers", text_of(r))
    check(len(seen) >= 2 and all(a < b for a, b in zip(seen, seen[1:])), "progress notifications arrive, strictly increasing", seen)
    # Real progress: each node of the workflow that ends is one unit (node k of n).
    units = [(p, t, m) for (p, t, m) in reports if t is not None]
    check(any(p == 3 and t == 3 for (p, t, m) in units), "progress reaches node 3 of 3", reports)
    check(any("node wait succeeded" in (m or "") for (p, t, m) in units), "a progress message names the node that ended", reports)


async def run_stdio(binary, home):
    params = StdioServerParameters(command=binary, args=["--home", home, "mcp", "--page-size", "3"])
    async with Client(params) as client:
        check(client.protocol_version in ("2025-11-25", "2025-06-18", "2025-03-26"), "the client fell back from discover to initialize", client.protocol_version)
        await exercise(client)


async def run_http(url):
    async with Client(url) as client:
        check(client.protocol_version == "2025-11-25", "HTTP negotiates 2025-11-25", client.protocol_version)
        await exercise(client)


async def run_watch(binary, home):
    changed = asyncio.Event()

    async def handler(message):
        if isinstance(message, types.ToolListChangedNotification) or getattr(message, "method", "") == "notifications/tools/list_changed":
            changed.set()

    params = StdioServerParameters(command=binary, args=["--home", home, "mcp", "--watch"])
    async with Client(params, message_handler=handler) as client:
        before, _ = await all_tools(client)
        names = {t.name for t in before}
        check("LuaDemo_hello" not in names, "the new tool is not there before the change", sorted(names))
        tool = {
            "id": "LuaDemo:hello",
            "description": "Says hello.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "implementation": {"type": "service", "script": "main.lua", "function": "echo"},
        }
        Path(home, "plugins", "LuaDemo", "tools", "hello.tool.json").write_text(json.dumps(tool))
        try:
            await asyncio.wait_for(changed.wait(), 20)
            got = True
        except asyncio.TimeoutError:
            got = False
        check(got, "a reload under --watch sends notifications/tools/list_changed")
        after, _ = await all_tools(client)
        check("LuaDemo_hello" in {t.name for t in after}, "the reloaded list has the new tool", sorted(t.name for t in after))
        r = await client.call_tool("LuaDemo_hello", {"text": "hello"})
        check(text_of(r) == "hello", "the new tool answers", text_of(r))
        # A broken file: the old engine keeps serving.
        Path(home, "plugins", "LuaDemo", "tools", "broken.tool.json").write_text("{ not json")
        await asyncio.sleep(1.5)
        r = await client.call_tool("LuaDemo_hello", {"text": "still here"})
        check(text_of(r) == "still here", "a broken change keeps the previous engine serving", text_of(r))


def main():
    mode = sys.argv[1]
    if mode == "stdio":
        asyncio.run(run_stdio(sys.argv[2], sys.argv[3]))
    elif mode == "http":
        asyncio.run(run_http(sys.argv[2]))
    elif mode == "watch":
        asyncio.run(run_watch(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(f"unknown mode {mode}")
    print(f"OK {CHECKS} checks", flush=True)


if __name__ == "__main__":
    main()
