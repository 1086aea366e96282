"""Client messages of an MCP session that reach another server process than the call they are for.

A tool call runs on the process that got its `tools/call` POST: its progress notifications and its
elicitation request go out on that POST's response stream, whichever process it is. Two messages the
client sends later belong to that call but, behind a load balancer without affinity, may reach any process:
- its answer to the elicitation (a JSON-RPC response, POSTed on its own): the process that gets it keeps
  it in the store for every other process whose call of the session waits for an answer, and those look
  for it every POLL_SECONDS while they wait (only then) and hand it to their own transport;
- `notifications/cancelled`: the process that gets it looks the call up in the store and, when another
  process runs it, cancels its turn the way every route cancels a turn across processes (a flag in the
  store that the lease holder polls).
Either is also handed to the local transport, as it would be without this, which ignores what is not its own.
"""
from __future__ import annotations

import asyncio
import json
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
from starlette.types import Message, Receive

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25                 # how soon an answer another process got reaches the waiting call


async def read_body(receive: Receive) -> bytes:
    """A request's whole body (the transport reads it whole too; its size is limited before this)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive | None = None) -> Receive:
    """A `receive` that gives `body` again, then passes on `receive`'s messages (the SSE response listens
    there for the client going away), or a disconnect when there is none."""
    given = False

    async def again() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        if receive is None:
            return {"type": "http.disconnect"}
        return await receive()

    return again


def relevant(body: bytes) -> dict[str, Any] | None:
    """The message when it may be a response or a cancellation (the only ones passed on); other bodies,
    tool calls among them, are not parsed twice."""
    if b'"result"' not in body and b'"error"' not in body and b"notifications/cancelled" not in body:
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None             # the transport answers it with a parse error
    return message if isinstance(message, dict) else None


def is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and message.get("id") is not None and ("result" in message or "error" in message)


class Relay:
    """Passes an MCP session's answers and cancellations on to the process that runs the call."""

    def __init__(self, store: Any, owner: str, cancel_turn: Callable[[str, str], Awaitable[Any]],
                 deliver: Callable[[str, bytes], Awaitable[None]]):
        self.store, self.owner = store, owner
        self.cancel_turn = cancel_turn      # (tenant, canvas2graph session id): cancels its turn wherever it runs
        self.deliver = deliver              # (MCP session id, body): hands a message to the transport here

    async def pass_on(self, session_id: str, tenant: str, body: bytes) -> None:
        """Keep or act on a client message for the other processes it may be for."""
        message = relevant(body)
        if message is None:
            return
        try:
            if is_response(message):
                for owner in await self.store.mcp_askers(session_id) - {self.owner}:
                    await self.store.add_mcp_reply(session_id, owner, body.decode("utf-8", "replace"))
            elif message.get("method") == "notifications/cancelled":
                params = message.get("params")
                request_id = params.get("requestId") if isinstance(params, dict) else None
                call = await self.store.mcp_call(session_id, str(request_id)) if request_id is not None else None
                if call is not None and call["call_owner"] != self.owner:
                    await self.cancel_turn(tenant, call["session_id"])
        except Exception:           # the local transport still gets the message: never fail the request for this
            log.exception("passing an MCP message of session %s on to other processes failed", session_id[:64])

    @asynccontextmanager
    async def asking(self, session_id: str, agent_id: str) -> AsyncIterator[None]:
        """While a call waits for the client's answer to its elicitation: marked in the store, so that
        other processes keep the answer for this one, which looks for it meanwhile."""
        await self.store.set_mcp_asking(session_id, agent_id, True)
        fetching = asyncio.create_task(self._fetch(session_id), name=f"mcp-answers-{session_id[:16]}")
        try:
            yield
        finally:
            fetching.cancel()
            with anyio.CancelScope(shield=True):
                await self.store.set_mcp_asking(session_id, agent_id, False)

    async def _fetch(self, session_id: str) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                for body in await self.store.take_mcp_replies(session_id, self.owner):
                    await self.deliver(session_id, body.encode())
            except Exception:       # a database hiccup must not end the wait: the answer may still come here
                log.exception("fetching MCP answers of session %s failed", session_id[:64])
