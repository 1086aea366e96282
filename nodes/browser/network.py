"""Every connection the browser makes, through the host guard (`canvas2graph.runtime.services.netguard`).

Chromium is started with one way out: a forward proxy this module runs on 127.0.0.1 for the length
of the session (it also cannot resolve names itself, and loopback is not exempted from the proxy).
For each request the proxy checks the target: the host is resolved once and refused when any of its
addresses is private, loopback, link-local or otherwise non-public, unless the operator allows private
hosts to the Browser (`CANVAS2GRAPH_BROWSER_ALLOW_PRIVATE=1`, or `ctx.extras["allow_private"]`); the
connection then goes to the address that was checked (DNS pinning). Plain HTTP requests are fetched
here and answered (redirects are handed back, so the browser's next request is checked again);
HTTPS and WebSocket traffic arrives as `CONNECT host:port`, checked the same way, then tunnelled
unread: TLS stays between the browser and the site.

This is the one place the Browser calls the guard: `check_url`, `connect_address` and the proxy.
"""
from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h11
import httpx

from canvas2graph.runtime.services.netguard import HostGuard, HostRefused
from canvas2graph.nodes.tool import ToolError

COMPONENT = "Browser"
HOP_HEADERS = {"host", "connection", "content-length", "accept-encoding", "keep-alive", "proxy-connection",
               "proxy-authorization", "transfer-encoding", "upgrade", "te", "trailer"}
DROPPED_RESPONSE_HEADERS = {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class Fetched:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k.lower() == name.lower()), "")


async def connect_address(host: str, port: int, ctx: Any) -> str:
    """The address to connect to for host:port: the checked (pinned) one, or the host itself when private
    hosts are allowed. Raises HostRefused for a non-public host."""
    return await HostGuard.of("Browser", ctx).address(host, port)


async def check_url(url: str, ctx: Any) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """Where to connect for `url`: (the URL to request, headers to add, transport extensions)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"{url!r} is not an http:// or https:// address")
    target = httpx.URL(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = await connect_address(parts.hostname, port, ctx)
    if address == parts.hostname:
        return target, {}, {}
    # connect to the address checked; the server still sees its own name (Host header, TLS SNI)
    host = target.netloc.decode("ascii").rpartition("@")[2]
    return target.copy_with(host=address), {"Host": host}, {"sni_hostname": parts.hostname}


async def guarded_fetch(method: str, url: str, headers: list[tuple[str, str]] | dict[str, str], body: bytes | None,
                        ctx: Any, *, timeout: float, max_bytes: int) -> Fetched:
    """One request through the guard, redirects not followed, the body read up to `max_bytes`."""
    target, extra_headers, extensions = await check_url(url, ctx)
    pairs = headers.items() if isinstance(headers, dict) else headers
    sent = [(k, v) for k, v in pairs if k.lower() not in HOP_HEADERS] + list(extra_headers.items())
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client:
        async with client.stream(method, target, headers=sent, content=body, extensions=extensions) as response:
            data = bytearray()
            async for piece in response.aiter_bytes():
                data += piece
                if len(data) > max_bytes:
                    raise ToolError(f"{urlsplit(url).netloc} sent more than {max_bytes // 1_000_000} MB")
            kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in DROPPED_RESPONSE_HEADERS]
            return Fetched(response.status_code, kept, bytes(data))


class GuardProxy:
    """The forward proxy Chromium is pointed at; `refused` collects what the guard turned away."""

    def __init__(self, ctx: Any, *, timeout: float, max_bytes: int):
        self.ctx, self.timeout, self.max_bytes = ctx, timeout, max_bytes
        self.refused: list[str] = []
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                event = await _next_event(conn, reader)
                if not isinstance(event, h11.Request):
                    break
                if event.method == b"CONNECT":
                    await self._tunnel(event, conn, reader, writer)
                    return
                await self._forward(event, conn, reader, writer)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _forward(self, request: h11.Request, conn: h11.Connection, reader, writer) -> None:
        body = bytearray()
        while True:
            event = await _next_event(conn, reader)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.max_bytes:
                    return await self._answer(conn, writer, 413, "the request body is too large")
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return
        url = request.target.decode("latin-1")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers]
        try:
            fetched = await guarded_fetch(request.method.decode(), url, headers, bytes(body) or None, self.ctx,
                                          timeout=self.timeout, max_bytes=self.max_bytes)
        except HostRefused as e:
            self.refused.append(str(e))
            return await self._answer(conn, writer, 403, str(e))
        except Exception as e:          # unreachable, a timeout, too large: a failed load, said in words
            return await self._answer(conn, writer, 502, f"cannot load {url}: {e or type(e).__name__}")
        head = list(fetched.headers)
        if fetched.status >= 200 and fetched.status not in (204, 304):
            head.append(("Content-Length", str(len(fetched.body))))
        writer.write(conn.send(h11.Response(status_code=fetched.status, headers=head)))
        writer.write(conn.send(h11.Data(data=fetched.body)) if fetched.body else b"")
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()

    async def _tunnel(self, request: h11.Request, conn: h11.Connection, reader, writer) -> None:
        host, _, port_text = request.target.decode("latin-1").rpartition(":")
        host = host.strip("[]")
        try:
            port = int(port_text)
            address = await connect_address(host, port, self.ctx)
            upstream_reader, upstream_writer = await asyncio.wait_for(asyncio.open_connection(address, port),
                                                                      self.timeout)
        except HostRefused as e:
            self.refused.append(str(e))
            return await self._answer(conn, writer, 403, str(e))
        except Exception as e:
            return await self._answer(conn, writer, 502, f"cannot connect to {host}: {e or type(e).__name__}")
        writer.write(conn.send(h11.Response(status_code=200, headers=[])))
        await writer.drain()
        leftover, _ = conn.trailing_data
        if leftover:
            upstream_writer.write(leftover)
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            with contextlib.suppress(Exception):
                upstream_writer.close()

    async def _answer(self, conn: h11.Connection, writer, status: int, text: str) -> None:
        body = text.encode("utf-8")
        writer.write(conn.send(h11.Response(status_code=status, headers=[
            ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))), ("Connection", "close")])))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader):
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await reader.read(65536))


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            sink.write_eof()


__all__ = ["Fetched", "GuardProxy", "HostRefused", "check_url", "connect_address", "guarded_fetch"]
