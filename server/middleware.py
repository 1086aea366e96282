"""Request bodies: a body over the limit is refused before any handler parses it, and a JSON body is read
as JSON whatever its declared type (`curl -d` says form-urlencoded; RAGFlow reads the JSON anyway).
A JSON body must be text: bytes that are not UTF-8, or a lone UTF-16 surrogate escaped in a string
("\\ud800", valid JSON that no database, log or client can encode), are refused with a 400 naming the
problem, before any handler stores or echoes them."""
from __future__ import annotations

import json
import re

from canvas2graph.text import has_surrogate
from canvas2graph.server.errors import RetCode

# a JSON escape of a UTF-16 surrogate (\ud800-\udfff): pairs are fine, lone ones are not; only bodies
# with one are parsed here to tell which
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class BodyLimit:
    """Pure ASGI middleware: reads the body up to `max_bytes`, then replays it to the app.

    A declared Content-Length over the limit is refused at once; a chunked body is refused as soon as
    it passes the limit, so no handler ever holds more than `max_bytes` of one request.
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                return await self._refuse(send, 400, "the Content-Length header is not a number")
            if too_big:
                return await self._refuse(send, 413, self._message())
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                return await self._refuse(send, 413, self._message())
            chunks.append(body)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        headers = list(scope.get("headers") or [])
        declared_type = dict(headers).get(b"content-type", b"")
        looks_json = body.lstrip()[:1] in (b"{", b"[")
        if b"json" not in declared_type and looks_json:
            headers = [(k, v) for k, v in headers if k != b"content-type"] + [(b"content-type", b"application/json")]
            scope = {**scope, "headers": headers}
        if b"json" in declared_type or looks_json:
            problem = not_text(body)
            if problem:
                return await self._refuse(send, 400, problem)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()      # later calls wait for the client's disconnect, as usual

        await self.app(scope, replay, send)

    def _message(self) -> str:
        return f"the request body is larger than the server's limit of {self.max_bytes} bytes"

    @staticmethod
    async def _refuse(send, status: int, message: str) -> None:
        body = json.dumps({"code": int(RetCode.ARGUMENT_ERROR), "message": message}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def not_text(body: bytes) -> str | None:
    """Why a JSON body is not text, or None."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"the request body is not UTF-8 text ({e.reason} at byte {e.start})"
    if _SURROGATE_ESCAPE.search(body) is None:
        return None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None                 # not JSON: the handler says so
    if has_surrogate(value):
        return ("the request body holds a lone UTF-16 surrogate (an escape such as \\ud800 without its pair), "
                "which is not a character: send the text as UTF-8")
    return None
