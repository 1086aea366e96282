"""MCP servers for Agent tools (SPEC 7, "MCP config"): where each server is, and a client for it.

A DSL names an MCP server by id only (`params.mcp[i].mcp_id`); RAGFlow keeps each server's URL,
transport, headers and variables in its database. canvas2graph reads them from a JSON file given
with `canvas2graph run --mcp-config FILE` (or `$CANVAS2GRAPH_MCP_CONFIG`):

    {"servers": {"<mcp_id>": {"url": "http://127.0.0.1:8000/mcp",
                              "transport": "streamable-http",        # or "sse"
                              "headers": {"Authorization": "Bearer ${token}"},
                              "variables": {"token": "..."},
                              "timeout": 30,
                              "allow_private": true}}}                # the default in this file

`${name}` in a header's name or value is replaced from the server's `variables`, as RAGFlow fills
its stored headers; a header left empty (or a bare "Bearer") is not sent.

Every connection to a server goes through the host guard (`canvas2graph.runtime.services.netguard`), checked and pinned.
A server the operator lists in this file may be on a private or loopback address (the operator chose
it; `"allow_private": false` guards it too). A server that comes from anywhere else (an
`MCPServerConfig` built in code, e.g. from a tenant's request) is refused on such addresses unless
`allow_private` is set or the operator sets `CANVAS2GRAPH_MCP_ALLOW_PRIVATE=1`.

A connection is one MCP session. Its transport and `ClientSession` are entered and exited by one
background task, because both hold anyio cancel scopes that must be left by the task that entered
them, while the Agent calls tools from several tasks at once (one per tool call of a round).
"""
from __future__ import annotations

import asyncio
import json
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any, Mapping

from canvas2graph.runtime.services.netguard import HostGuard, private_allowed

ENV_VAR = "CANVAS2GRAPH_MCP_CONFIG"
TRANSPORTS = ("streamable-http", "sse")
DEFAULT_TIMEOUT = 30.0          # seconds for one tool call (and for connecting)
CLOSE_TIMEOUT = 5.0             # how long a session may take to say goodbye before it is cut


class MCPConfigError(Exception):
    """The MCP config file, or a server in it, is unusable; the message names the file and field."""


class MCPServerNotConfigured(Exception):
    """An Agent names an MCP server the run has no config for."""


@dataclass(frozen=True)
class MCPServerConfig:
    id: str
    url: str
    transport: str = "streamable-http"
    headers: Mapping[str, str] = field(default_factory=dict)
    variables: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    allow_private: bool = False      # may be on a private or loopback address (the operator's file says so by default)

    def request_headers(self, custom: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The headers sent to the server: its own with variables filled, then the Agent's `custom_header`."""
        variables = {k: str(v) for k, v in self.variables.items()}
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            name = Template(name).safe_substitute(variables).strip()
            value = Template(str(value)).safe_substitute(variables).strip()
            if name and value and value != "Bearer":      # an unset token leaves nothing worth sending
                headers[name] = value
        for name, value in (custom or {}).items():
            if str(name).strip():
                headers[str(name).strip()] = str(value)
        return headers


class MCPServers:
    """The MCP servers a run can reach, by id."""

    def __init__(self, servers: Mapping[str, MCPServerConfig] | None = None, source: str = "MCP config"):
        self.servers = dict(servers or {})
        self.source = source

    def get(self, mcp_id: str) -> MCPServerConfig | None:
        return self.servers.get(mcp_id)

    def __contains__(self, mcp_id: object) -> bool:
        return mcp_id in self.servers

    @classmethod
    def load(cls, path: str | os.PathLike) -> "MCPServers":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise MCPConfigError(f"cannot read MCP config {path}: {e.strerror or e}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise MCPConfigError(f"MCP config {path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
        return cls.from_dict(data, source=f"MCP config {path}")

    @classmethod
    def from_env(cls) -> "MCPServers | None":
        """The servers of `$CANVAS2GRAPH_MCP_CONFIG`, or None when it is not set."""
        path = os.environ.get(ENV_VAR)
        return cls.load(path) if path else None

    @classmethod
    def from_dict(cls, data: Any, source: str = "MCP config") -> "MCPServers":
        if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
            raise MCPConfigError(f'{source}: expected an object {{"servers": {{"<mcp_id>": {{"url": ...}}}}}}')
        unknown = set(data) - {"servers"}
        if unknown:
            raise MCPConfigError(f"{source}: unknown key(s) {sorted(unknown)}; only \"servers\" is allowed")
        return cls({mcp_id: _server(mcp_id, raw, f"{source}: servers.{mcp_id}")
                    for mcp_id, raw in data["servers"].items()}, source)


_SERVER_KEYS = {"url", "transport", "headers", "variables", "timeout", "allow_private"}


def _server(mcp_id: str, raw: Any, where: str) -> MCPServerConfig:
    if not isinstance(raw, dict):
        raise MCPConfigError(f"{where} must be an object with a url")
    unknown = set(raw) - _SERVER_KEYS
    if unknown:
        raise MCPConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_SERVER_KEYS)}")
    url = raw.get("url")
    if not isinstance(url, str) or not url.strip().startswith(("http://", "https://")):
        raise MCPConfigError(f"{where}.url must be an http:// or https:// URL, not {url!r}")
    transport = raw.get("transport", "streamable-http")
    if transport not in TRANSPORTS:
        raise MCPConfigError(f"{where}.transport must be one of {list(TRANSPORTS)}, not {transport!r}")
    headers = raw.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise MCPConfigError(f"{where}.headers must be an object of header name: string value")
    variables = raw.get("variables") or {}
    if not isinstance(variables, dict):
        raise MCPConfigError(f"{where}.variables must be an object of name: value")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise MCPConfigError(f"{where}.timeout must be a positive number of seconds, not {timeout!r}")
    allow_private = raw.get("allow_private", True)
    if not isinstance(allow_private, bool):
        raise MCPConfigError(f"{where}.allow_private must be true or false, not {allow_private!r}")
    return MCPServerConfig(id=mcp_id, url=url.strip(), transport=transport, headers=headers,
                           variables=variables, timeout=float(timeout), allow_private=allow_private)


# --- the client ----------------------------------------------------------------------------
class MCPConnectionError(Exception):
    """The session could not be opened (server down, refused headers, not an MCP endpoint...)."""


def describe(e: BaseException) -> str:
    """One readable line for a failure that may arrive wrapped in anyio's exception groups."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e).strip().split("\n", 1)[0]        # httpx adds a line of links to status errors
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class MCPConnection:
    """One MCP session to one server; `async with` opens it and closes it."""

    def __init__(self, config: MCPServerConfig, custom_headers: Mapping[str, Any] | None = None,
                 allow_private: bool = False):
        self.config = config
        self.headers = config.request_headers(custom_headers)
        self.guard = HostGuard("MCP", allow_private or config.allow_private or private_allowed(None, "MCP"))
        self._session: Any = None
        self._error: BaseException | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._owner: asyncio.Task | None = None
        self._refused: str | None = None    # the last HTTP error status, which the SDK does not report

    async def __aenter__(self) -> "MCPConnection":
        await self.open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    @property
    def is_open(self) -> bool:
        return self._owner is not None and not self._owner.done()

    async def open(self) -> None:
        """Connect and initialize; raises MCPConnectionError when the server cannot be used."""
        self._owner = asyncio.create_task(self._own(), name=f"mcp-session-{self.config.id}")
        try:
            await asyncio.wait_for(self._ready.wait(), self.config.timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise MCPConnectionError(f"no answer from {self.config.url} within {self.config.timeout:g} s") from None
        if self._error is not None:
            await self.aclose()
            reason = describe(self._error)
            if self._refused and self._refused not in reason:
                reason = f"the server answered {self._refused} ({reason})"
            raise MCPConnectionError(reason) from self._error

    async def _own(self) -> None:
        from mcp.client.session import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self._session = session
                self._ready.set()
                await self._closing.wait()
        except Exception as e:          # reported to whoever waits in open(); a later failure ends calls
            self._error = e
        finally:
            self._session = None
            self._ready.set()

    async def _transport(self, stack: AsyncExitStack):
        import httpx2
        if self.config.transport == "sse":
            from mcp.client.sse import sse_client

            def guarded_client(headers=None, timeout=None, auth=None) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(headers=headers, auth=auth, transport=self.guard.transport2(),
                                          timeout=timeout or httpx2.Timeout(self.config.timeout, read=300.0))
            streams = await stack.enter_async_context(
                sse_client(self.config.url, headers=self.headers, timeout=self.config.timeout,
                           httpx_client_factory=guarded_client))
            return streams[0], streams[1]
        from mcp.client.streamable_http import streamable_http_client
        async def note_refusal(response) -> None:
            if response.status_code >= 400:
                self._refused = f"HTTP {response.status_code} {response.reason_phrase}".strip()

        # the SDK takes headers only through the HTTP client it is given
        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers=self.headers, timeout=httpx2.Timeout(self.config.timeout, read=300.0),
            event_hooks={"response": [note_refusal]}, transport=self.guard.transport2()))
        streams = await stack.enter_async_context(streamable_http_client(self.config.url, http_client=http))
        return streams[0], streams[1]

    def _live_session(self):
        if self._session is None:
            raise MCPConnectionError(describe(self._error) if self._error else "the MCP session is closed")
        return self._session

    async def list_tools(self) -> list[Any]:
        """The server's tools (mcp `Tool` objects: name, description, input_schema), all pages."""
        from mcp_types import PaginatedRequestParams
        tools: list[Any] = []
        cursor = None
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await asyncio.wait_for(self._live_session().list_tools(params=params), self.config.timeout)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """The server's `CallToolResult`; raises on a protocol error (an unknown tool, say) or timeout."""
        session = self._live_session()
        return await asyncio.wait_for(session.call_tool(name, arguments), self.config.timeout)

    async def aclose(self) -> None:
        """End the session (streamable HTTP also tells the server); never raises."""
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT)
        except asyncio.TimeoutError:          # a hung goodbye: cut the session
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
        except asyncio.CancelledError:        # we are being cancelled: do not leave the session behind
            owner.cancel()
            raise


def result_text(result: Any) -> str:
    """A `CallToolResult` as the text a model reads."""
    parts: list[str] = []
    for item in result.content or []:
        if getattr(item, "type", None) == "text":
            parts.append(item.text)
        elif getattr(item, "type", None) == "resource" and hasattr(item.resource, "text"):
            parts.append(item.resource.text)
        else:             # images, audio, links: a chat model's tool message carries text only
            parts.append(f"[{getattr(item, 'type', 'unknown')} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if result.is_error:
        return f"MCP tool error: {text or 'the tool failed without a message'}"
    return text or "The MCP tool returned no content."


class MCPSessions:
    """The MCP sessions of one Agent tool loop: opened on a server's first call, closed together.

    Every failure becomes the text of the tool result, so the model reads it and may recover: a
    server that cannot be reached, an unknown tool, a tool that raised, a timeout.
    """

    def __init__(self, custom_headers: Mapping[str, Any] | None = None, allow_private: bool = False):
        self.custom_headers = dict(custom_headers or {})
        self.allow_private = allow_private          # the run lifts the guard for every server
        self.connections: dict[str, MCPConnection] = {}
        self._opening: dict[str, asyncio.Task] = {}

    async def __aenter__(self) -> "MCPSessions":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def _connection(self, config: MCPServerConfig) -> MCPConnection:
        # concurrent calls to one server share one session: the first call opens it, the rest wait
        task = self._opening.get(config.id)
        if task is None:
            task = self._opening[config.id] = asyncio.ensure_future(self._open(config))
        return await asyncio.shield(task)

    async def _open(self, config: MCPServerConfig) -> MCPConnection:
        connection = MCPConnection(config, self.custom_headers, self.allow_private)
        await connection.open()
        self.connections[config.id] = connection
        return connection

    async def call(self, config: MCPServerConfig, tool: str, arguments: dict[str, Any]) -> str:
        try:
            connection = await self._connection(config)
        except MCPConnectionError as e:
            return f"MCP server {config.id!r} at {config.url} cannot be used: {e}"
        try:
            return result_text(await connection.call_tool(tool, arguments))
        except asyncio.TimeoutError:
            return f"MCP tool {tool!r} on server {config.id!r} did not answer within {config.timeout:g} s"
        except Exception as e:
            return f"MCP tool {tool!r} on server {config.id!r} failed: {describe(e)}"

    async def aclose(self) -> None:
        for task in self._opening.values():
            if not task.done():
                task.cancel()
        await asyncio.gather(*self._opening.values(), return_exceptions=True)
        connections, self.connections, self._opening = list(self.connections.values()), {}, {}
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)
