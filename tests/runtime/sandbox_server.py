"""A RAGFlow-compatible sandbox executor manager for the tests, on 127.0.0.1.

It speaks the manager's API (`POST /run` with `{code_b64, language, arguments}`, `GET /healthz`),
checks `Authorization: Bearer <token>` when it has a token (401 otherwise, as the manager does) and
really runs the code, with canvas2graph's local runner standing in for the manager's containers.
A test can replace the reply (`reply = (status, body)`) and reads every request it received.
"""
from __future__ import annotations

import asyncio
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from dataclasses import replace
from typing import Any

from canvas2graph.runtime.services.sandbox import CodePolicy
from canvas2graph.runtime.services.sandbox.local import run_local


class SandboxServer:
    def __init__(self, token: str = "", policy: CodePolicy | None = None) -> None:
        self.token = token
        # it stands for RAGFlow's executor manager, which isolates code its own way: the test server runs
        # the (test's own) scripts without this machine's sandbox, so these tests need no bubblewrap
        self.policy = replace(policy or CodePolicy(timeout=10), unsafe_local=True)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.reply: tuple[int, Any] | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode() if not isinstance(body, bytes) else body
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"status": "ok"}) if self.path == "/healthz" else self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/run":
                    return self._send(404, {"detail": "Not Found"})
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                if outer.token and self.headers.get("Authorization") != f"Bearer {outer.token}":
                    return self._send(401, {"detail": "Missing or invalid sandbox executor API token"})
                request = json.loads(body)
                outer.requests.append(request)
                if outer.reply is not None:
                    return self._send(*outer.reply)
                if request.get("language") not in ("python", "nodejs"):
                    return self._send(422, {"detail": [{"loc": ["body", "language"], "msg": "Input should be 'python' or 'nodejs'"}]})
                code = base64.b64decode(request["code_b64"], validate=True).decode("utf-8")
                execution = asyncio.run(run_local(request["language"], code, request.get("arguments") or {}, outer.policy))
                self._send(200, {**execution.to_wire(), "time_used_ms": 1.0, "memory_used_kb": None})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "SandboxServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
