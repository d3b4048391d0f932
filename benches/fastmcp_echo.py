"""The official Python SDK's own server (MCPServer, formerly FastMCP) with one echo tool, over
Streamable HTTP on loopback: the baseline `benches/serve_load.rs` compares tavern against.

Usage: python3 benches/fastmcp_echo.py <port> [json]
(`json`: answer each POST with one `application/json` message instead of an SSE stream, the
SDK's `json_response=True`.)
"""

import sys

try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

server = Server("echo")


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    json_response = sys.argv[2:] == ["json"]
    server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]), json_response=json_response)
