"""A real MCP server for the tests, on the official SDK: `python mcp_server.py TRANSPORT LOG_FILE`.

It binds a free port on 127.0.0.1, prints the port on its first line, then serves `TRANSPORT`
("streamable-http" at /mcp or "sse" at /sse). Every request must carry `Authorization: Bearer
test-token` (others get 401). Tool calls and HTTP requests are appended to LOG_FILE as JSON lines,
so a test can tell what really reached the server.
"""
from __future__ import annotations

import json
import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

TOKEN = b"Bearer test-token"


def main(transport: str, log_path: str) -> None:
    def log(**entry) -> None:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    server = MCPServer("canvas2graph-test")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        log(tool="add", args={"a": a, "b": b})
        return f"{a} + {b} = {a + b}"

    @server.tool(description="Fail with the given reason.")
    def explode(reason: str) -> str:
        log(tool="explode", args={"reason": reason})
        raise ToolError(f"exploded because {reason}")

    @server.tool(description="A tool that no test DSL lists.")
    def hidden() -> str:
        log(tool="hidden", args={})
        return "you should not see this"

    app = server.sse_app() if transport == "sse" else server.streamable_http_app()

    async def gate(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        request = {"method": scope["method"], "path": scope["path"]}
        if dict(scope["headers"]).get(b"authorization") != TOKEN:
            log(event="refused", **request)
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing or wrong Authorization"})
            return
        log(event="request", **request)
        try:
            await app(scope, receive, send)
        finally:
            log(event="done", **request)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(gate, log_level="warning", lifespan="on")).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
