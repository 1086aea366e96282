"""Stand-ins for the trace collectors, on 127.0.0.1: LangSmith's run ingestion and Langfuse's OTLP endpoint.

Each records what the tracers send, decoded: LangSmith runs (merged from their `post` and `patch`
parts, inputs and outputs included) and Langfuse spans (name, attributes, trace and parent ids).
Point a process at one with `LANGSMITH_ENDPOINT` or `LANGFUSE_HOST` = `collector.url`.
"""
from __future__ import annotations

import email.parser
import email.policy
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class Collector:
    """An HTTP server in a thread that hands every request to `receive(method, path, headers, body)`."""

    def __init__(self):
        collector = self
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with collector.lock:
                    collector.requests.append((self.command, self.path))
                    status, reply = collector.receive(self.command, self.path, self.headers, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = _any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def receive(self, method: str, path: str, headers, body: bytes) -> tuple[int, Any]:
        raise NotImplementedError

    def wait_for(self, done: Callable[[], bool], timeout: float = 20.0) -> None:
        """Wait until `done()` holds (tracers send in the background); fail with what arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if done():
                    return
            time.sleep(0.05)
        raise AssertionError(f"{type(self).__name__}: not received in {timeout} s; requests: {self.requests}")


class LangSmithCollector(Collector):
    """LangSmith's `/info` and run ingestion (`/runs/multipart`, zstd or plain; `/runs/batch`; `/runs`)."""

    def __init__(self):
        super().__init__()
        self.runs: dict[str, dict] = {}

    def receive(self, method, path, headers, body):
        path = path.split("?")[0]
        if method == "GET" and path == "/info":
            return 200, {"version": "0.10.0", "instance_flags": {"zstd_compression_enabled": True},
                         "batch_ingest_config": {
                             "use_multipart_endpoint": True, "scale_up_qsize_trigger": 1000,
                             "scale_up_nthreads_limit": 16, "scale_down_nempty_trigger": 4, "size_limit": 100,
                             "size_limit_bytes": 20_971_520}}
        if headers.get("Content-Encoding") == "zstd":
            import zstandard
            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        elif headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if method == "POST" and path == "/runs/multipart":
            self._multipart(headers.get("Content-Type", ""), body)
        elif method == "POST" and path == "/runs/batch":
            batch = json.loads(body)
            for run in batch.get("post", []) + batch.get("patch", []):
                self._merge(run["id"], run)
        elif method == "POST" and path == "/runs":
            run = json.loads(body)
            self._merge(run["id"], run)
        elif method == "PATCH" and path.startswith("/runs/"):
            self._merge(path.rsplit("/", 1)[1], json.loads(body))
        return 200, {}

    def _multipart(self, content_type: str, body: bytes) -> None:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition") or ""
            kind, _, rest = name.partition(".")
            run_id, _, field = rest.partition(".")
            if kind not in ("post", "patch") or not run_id:
                continue
            value = json.loads(part.get_payload(decode=True))
            self._merge(run_id, {field: value} if field else value)

    def _merge(self, run_id: str, fields: dict) -> None:
        run = self.runs.setdefault(run_id, {"id": run_id})
        for key, value in fields.items():
            if isinstance(value, dict) and isinstance(run.get(key), dict):
                run[key] = {**run[key], **value}
            else:
                run[key] = value

    def named(self, name: str) -> list[dict]:
        with self.lock:
            return [r for r in self.runs.values() if r.get("name") == name]

    def finished_roots(self) -> list[dict]:
        return [r for r in self.runs.values() if not r.get("parent_run_id") and r.get("end_time")]


class LangfuseCollector(Collector):
    """Langfuse's OTLP trace endpoint (`/api/public/otel/v1/traces`, protobuf, gzip or plain)."""

    def __init__(self):
        super().__init__()
        self.spans: list[dict] = []
        self.auth: list[str] = []

    def receive(self, method, path, headers, body):
        if method == "POST" and path.split("?")[0] == "/api/public/otel/v1/traces":
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
            if headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.auth.append(headers.get("Authorization", ""))
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(_span(s) for s in scope.spans)
            return 200, {}
        return 404, {"message": f"no route {method} {path}"}

    def named(self, name: str) -> list[dict]:
        with self.lock:
            return [s for s in self.spans if s["name"] == name]


def _value(v) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _span(span) -> dict:
    return {"name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
            "parent_id": span.parent_span_id.hex(), "attributes": {a.key: _value(a.value) for a in span.attributes}}
