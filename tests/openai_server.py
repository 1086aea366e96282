"""An OpenAI-compatible chat completions server on 127.0.0.1, answering from a list of replies.

It speaks the wire protocol langchain-openai speaks to real providers (`POST /v1/chat/completions`,
JSON or SSE chunks, tool calls streamed as argument fragments, usage in a last chunk), so tests can
run the live-provider path (ModelFactory -> ChatOpenAI -> the network) without a network.

A reply is a string (the answer) or `{"tool_calls": [{"name": ..., "arguments": {...}}]}`. When the
replies run out, the server answers "(no more replies)". Every request body is kept in `requests`.
Subclasses choose replies another way (`reply_for`) or hold a reply part-way (`midway`).
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}


class OpenAIServer:
    def __init__(self, replies: list[str | dict] | None = None):
        self.replies = list(replies or [])
        self.requests: list[dict[str, Any]] = []       # {"body": ..., "auth": ...}
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL a client is configured with (ends in /v1)."""
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def reply_for(self, body: dict) -> str | dict:
        """The reply to a request: the next of `replies`."""
        with self._lock:
            return self.replies.pop(0) if self.replies else "(no more replies)"

    def midway(self, body: dict, reply: str | dict) -> None:
        """Called after the first streamed piece (before a JSON reply): a subclass may wait here."""

    def close(self) -> None:
        self.__exit__()

    def __enter__(self) -> "OpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)


def _tool_calls(reply: dict, n: int) -> list[dict]:
    return [{"id": f"call_{n}_{i}", "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
            for i, c in enumerate(reply["tool_calls"])]


def _stream_events(reply: str | dict, n: int) -> list[dict]:
    """The deltas a provider streams: the role, then content pieces or tool-call fragments, then the
    finish reason, then usage."""
    deltas: list[dict] = [{"role": "assistant", "content": ""}]
    if isinstance(reply, dict):
        for i, call in enumerate(_tool_calls(reply, n)):
            args = call["function"]["arguments"]
            half = len(args) // 2
            deltas.append({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                           "function": {"name": call["function"]["name"], "arguments": args[:half]}}]})
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]})
        finish = "tool_calls"
    else:
        words = reply.split(" ")
        deltas += [{"content": w + (" " if i < len(words) - 1 else "")} for i, w in enumerate(words)]
        finish = "stop"
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    events.append({"choices": [], "usage": USAGE})
    return events


def _handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:      # keep pytest's output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            if self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with server._lock:
                server.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                n = len(server.requests)
            try:
                self.answer(body, server.reply_for(body), n)
            except (BrokenPipeError, ConnectionResetError):
                pass                                    # the client went away mid-reply

        def answer(self, body: dict, reply: str | dict, n: int) -> None:
            base = {"id": f"chatcmpl-{n}", "created": 1700000000, "model": body["model"]}
            if not body.get("stream"):
                server.midway(body, reply)
                message: dict[str, Any] = {"role": "assistant", "content": None if isinstance(reply, dict) else reply}
                if isinstance(reply, dict):
                    message["tool_calls"] = _tool_calls(reply, n)
                finish = "tool_calls" if isinstance(reply, dict) else "stop"
                data = json.dumps({**base, "object": "chat.completion", "usage": USAGE,
                                   "choices": [{"index": 0, "message": message, "finish_reason": finish}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i, event in enumerate(_stream_events(reply, n)):
                self.wfile.write(f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', **event})}\n\n".encode())
                self.wfile.flush()
                if i == 1:
                    server.midway(body, reply)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler
