"""MCP sessions that every server process serves: streamable HTTP sessions of the `mcp` package whose
state lives in the store (`server/backend/store_mcp.py`), not in the memory of the process that opened them.

The SDK's `StreamableHTTPSessionManager` keeps its sessions in a dict of its process: a session id it did
not issue answers 404, and it offers no way to take one over. Its `stateless` mode issues no session id at
all (calls could not continue one conversation) and refuses server-to-client requests (no elicitation).
So `SharedSessions` does what the manager's stateful path does, from the SDK's public parts (the transport,
`JSONRPCDispatcher`, `Connection`, `serve_connection`), and adds one thing: a request naming a session this
process does not hold, but the store knows, *adopts* it. A transport is made for that id, driving a
connection that is born initialized with what the session's `initialize` settled (protocol version, client
capabilities), as if that `initialize` had come here. A process holds a session's transport until it is
idle for SESSION_IDLE_SECONDS; the store keeps the session until it is idle for the TTL.

Requests of the 2026 protocol carry their own envelope and have no session: the SDK's manager serves them.
"""
from __future__ import annotations

import logging
import time
import uuid
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, ErrorData, InitializeRequestParams, JSONRPCError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from canvas2graph.server.backend.store import process_owner
from canvas2graph.server.protocols.mcp_relay import Relay, read_body, replay

log = logging.getLogger(__name__)

TENANT_KEY = "c2g.tenant"           # the scope key the endpoint puts the request's tenant under
SESSION_IDLE_SECONDS = 30 * 60.0    # a process drops its transport of a session idle this long (the store keeps it)
MAX_LOCAL_SESSIONS = 10_000         # transports one process holds at once (the SDK's default limit)
CHECK_SECONDS = 5.0                 # how stale a process's word on a session may be (another may have ended it)
DEFAULT_TTL = 24 * 3600.0           # a session idle this long is deleted from the store


class SessionRefused(Exception):
    """A request this process cannot serve: answered with `status` and a JSON-RPC error, as the SDK does."""

    def __init__(self, status: int, message: str, code: int = INVALID_REQUEST):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=self.code, message=self.message))
        response = Response(body.model_dump_json(by_alias=True, exclude_unset=True), status_code=self.status,
                            media_type="application/json")
        await response(scope, receive, send)


@dataclass
class Held:
    """A session this process holds a transport for."""
    transport: StreamableHTTPServerTransport
    tenant: str
    checked: float              # when (monotonic) the store last confirmed the session


def not_found() -> SessionRefused:
    # the SDK's answer to an unknown id, to an ended one and to another tenant's alike
    return SessionRefused(404, "Session not found")


class SharedSessions:
    """The MCP sessions this process serves, any of which another process may have opened."""

    def __init__(self, server: Server, ttl: float = DEFAULT_TTL):
        self.server = server
        self.ttl = ttl
        # the seen time is written when it is this old, the sweep runs this often: neither per request
        self.touch_every = self.sweep_every = min(ttl / 24, 3600.0)
        self.owner = process_owner()
        self.modern = StreamableHTTPSessionManager(app=server)      # the 2026 protocol: no sessions to share
        self.asgi = RequestBodyLimitMiddleware(self._handle, DEFAULT_MAX_REQUEST_BODY_SIZE)
        self.local: dict[str, Held] = {}
        self.store: Any = None
        self.relay: Relay | None = None
        self._adopting = anyio.Lock()
        self._tasks: TaskGroup | None = None
        self._lifespan_state: Any = None

    @asynccontextmanager
    async def run(self, store: Any, cancel_turn: Callable[[str, str], Awaitable[Any]]) -> AsyncIterator[None]:
        """Serve sessions (and sweep expired ones from `store`) until the context ends. `cancel_turn(tenant,
        session_id)` cancels a canvas2graph session's turn wherever it runs."""
        self.store = store
        self.relay = Relay(store, self.owner, cancel_turn, self.deliver)
        async with self.modern.run(), self.server.lifespan(self.server) as state, anyio.create_task_group() as tg:
            self._tasks, self._lifespan_state = tg, state
            tg.start_soon(self._sweep)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                self._tasks = None
                self.local.clear()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request; `scope[TENANT_KEY]` is the tenant its token names."""
        await self.asgi(scope, receive, send)

    def waiting_for_answer(self, session_id: str, agent_id: str) -> AbstractAsyncContextManager[None]:
        """Entered while the agent's call in the session waits for the client's answer to an elicitation,
        which may reach another process."""
        if self.relay is None:
            raise RuntimeError("SharedSessions.run() has not started")
        return self.relay.asking(session_id, agent_id)

    # --- requests -------------------------------------------------------------------------------
    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self.modern.handle_request(scope, receive, send)
            return
        if self._tasks is None or self.relay is None:
            raise RuntimeError("SharedSessions.run() has not started")
        session_id, tenant = headers.get(MCP_SESSION_ID_HEADER), scope[TENANT_KEY]
        try:
            if session_id is None:
                await self._open(tenant, scope, receive, send)
                return
            held = await self._held(session_id, tenant)
        except SessionRefused as refused:
            await refused.answer(scope, receive, send)
            return
        if scope["method"] == "POST":
            body = await read_body(receive)
            await self.relay.pass_on(session_id, tenant, body)
            receive = replay(body, receive)
        await held.transport.handle_request(scope, receive, send)
        if scope["method"] == "DELETE" and held.transport.is_terminated:     # the client ended it: everywhere
            await self._drop(session_id, held.transport)
            await self.store.delete_mcp_session(session_id)

    async def _held(self, session_id: str, tenant: str) -> Held:
        """The session's transport here (adopted when another process opened it), or SessionRefused."""
        held = self.local.get(session_id)
        if held is not None and not alive(held.transport):     # it idled out here: adopted again below
            await self._drop(session_id, held.transport)
            held = None
        if held is not None and time.monotonic() - held.checked < CHECK_SECONDS:
            if held.tenant != tenant:
                raise not_found()
            return held
        row = await self.store.get_mcp_session(session_id)
        if row is None:                 # ended or expired, maybe by another process
            if held is not None:
                await self._drop(session_id, held.transport)
            raise not_found()
        if row["tenant"] != tenant:
            log.warning("refused MCP session %s to another tenant", session_id[:64])
            raise not_found()
        if time.time() - row["seen_at"] >= self.touch_every:
            await self.store.touch_mcp_session(session_id)
        async with self._adopting:      # two first requests at once adopt it once
            held = self.local.get(session_id)
            if held is None:
                held = await self._adopt(session_id, row)
        held.checked = time.monotonic()
        return held

    async def _open(self, tenant: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session: an `initialize` that opens one (anything else is refused by the
        transport). The store holds the session before the client reads the `initialize` result, so its
        next request finds it whichever process it reaches."""
        session_id = uuid.uuid4().hex
        held = Held(self._transport(session_id), tenant, checked=time.monotonic())
        connection: Connection = await self._start(session_id, held.transport, None)
        self.local[session_id] = held
        recorded = False

        async def send_recorded(message: Message) -> None:
            nonlocal recorded
            # the handshake commits the client's params before its result is written
            if message["type"] == "http.response.body" and not recorded and connection.client_params is not None:
                client = connection.client_params.model_dump(by_alias=True, mode="json", exclude_none=True)
                await self.store.create_mcp_session(session_id, tenant, connection.protocol_version, client)
                recorded = True
            await send(message)

        established = False
        try:
            status = await answered_status(held.transport.handle_request, scope, receive, send_recorded)
            established = recorded and status is not None and status < 400
        finally:
            if not established:         # nothing was opened: forget it, as the SDK does
                await self._drop(session_id, held.transport)
                if recorded:
                    with anyio.CancelScope(shield=True):
                        await self.store.delete_mcp_session(session_id)

    async def _adopt(self, session_id: str, row: dict[str, Any]) -> Held:
        transport = self._transport(session_id)
        await self._start(session_id, transport, row)
        # held only once its loop runs: a request at the same moment must not reach an unconnected transport
        held = self.local[session_id] = Held(transport, row["tenant"], checked=time.monotonic())
        log.info("adopted MCP session %s opened by another process", session_id[:64])
        return held

    def _transport(self, session_id: str) -> StreamableHTTPServerTransport:
        if len(self.local) >= MAX_LOCAL_SESSIONS:
            raise SessionRefused(503, "Too many open sessions", INTERNAL_ERROR)
        return StreamableHTTPServerTransport(mcp_session_id=session_id, idle_timeout=SESSION_IDLE_SECONDS)

    # --- a session's message loop ---------------------------------------------------------------
    async def _start(self, session_id: str, transport: StreamableHTTPServerTransport,
                     row: dict[str, Any] | None) -> Connection:
        assert self._tasks is not None
        try:
            return await self._tasks.start(self._serve, session_id, transport, row)
        except BaseException:
            await self._drop(session_id, transport)
            raise

    async def _serve(self, session_id: str, transport: StreamableHTTPServerTransport, row: dict[str, Any] | None,
                     *, task_status: TaskStatus[Connection]) -> None:
        """The session's message loop (the SDK's `serve_loop`, with the connection made here so that an
        adopted one starts initialized), until the client ends it or it idles out here."""
        try:
            async with transport.connect() as (read_stream, write_stream):
                # `initialize` inline, as the SDK does: a client that pipelines its next request sees it done
                dispatcher = JSONRPCDispatcher(read_stream, write_stream, inline_methods=frozenset({"initialize"}))
                connection = Connection.for_loop(dispatcher, session_id=session_id)
                if row is not None:
                    restore(connection, row)
                task_status.started(connection)
                idle = transport.idle_scope or anyio.CancelScope()
                with idle:
                    await serve_connection(self.server, dispatcher, connection=connection,
                                           lifespan_state=self._lifespan_state)
        except Exception:
            log.exception("MCP session %s crashed", session_id[:64])
        finally:
            await self._drop(session_id, transport)

    async def _drop(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        """Stop holding the session here (the store keeps it): forgotten at once, its transport ended."""
        held = self.local.get(session_id)
        if held is not None and held.transport is transport:
            del self.local[session_id]
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()

    async def deliver(self, session_id: str, body: bytes) -> None:
        """Hand a message to the session's transport here as if the client had POSTed it here (an answer
        that reached another process)."""
        held = self.local.get(session_id)
        if held is None:
            return
        scope = {"type": "http", "method": "POST", "path": "/", "raw_path": b"/", "query_string": b"",
                 "root_path": "", "scheme": "http", "http_version": "1.1", "server": None, "client": None,
                 "headers": [(b"content-type", b"application/json"),
                             (b"accept", b"application/json, text/event-stream"),
                             (MCP_SESSION_ID_HEADER.encode(), session_id.encode())]}

        async def ignore(message: Message) -> None:
            pass                    # its 202 goes nowhere: the client had its answer from the other process

        await held.transport.handle_request(scope, replay(body), ignore)

    async def _sweep(self) -> None:
        """Delete the sessions idle for the TTL, every `sweep_every` seconds (every process does; it is idempotent)."""
        while True:
            try:
                gone = await self.store.expire_mcp_sessions(time.time() - self.ttl)
                if gone:
                    log.info("%d MCP sessions idle for %g s or more deleted", gone, self.ttl)
            except Exception:       # a database hiccup must not end the sweep
                log.exception("expiring MCP sessions failed")
            await anyio.sleep(self.sweep_every)


def alive(transport: StreamableHTTPServerTransport) -> bool:
    """Whether the transport still serves: not ended, and its idle time here not just run out."""
    return not transport.is_terminated and not (transport.idle_scope is not None and transport.idle_scope.cancel_called)


def restore(connection: Connection, row: dict[str, Any]) -> None:
    """Put a session's handshake (as the store keeps it) on a fresh connection: initialized, with the
    client's capabilities (elicitation) and the protocol version they settled."""
    connection.client_params = InitializeRequestParams.model_validate(row["client"], by_name=False)
    connection.protocol_version = row["protocol_version"]
    connection.initialized.set()


async def answered_status(app: Callable[[Scope, Receive, Send], Awaitable[None]], scope: Scope, receive: Receive,
                          send: Send) -> int | None:
    """Run `app` for one request; the HTTP status it answered (None when it sent no response)."""
    status: int | None = None

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status

