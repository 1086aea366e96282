"""Test support for the web tools: a real HTTP server on 127.0.0.1 standing in for each service, and
helpers that run a tool as a canvas node and as an Agent tool through the real compiler and runtime."""
from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel
from canvas2graph.runtime.run.runner import Runner, TurnRequest


@dataclass
class Seen:
    """One request the fake service received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body.decode(), keep_blank_values=True).items()}


@dataclass
class Reply:
    status: int = 200
    body: Any = None               # dict/list -> JSON, str -> text, bytes as they are
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0             # seconds to wait before answering (a slow service)


Handler = Callable[[Seen], Reply]


class FakeService:
    """A threaded HTTP server on 127.0.0.1: tests register answers per (method, path) and read back
    every request it received."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler | Reply] = {}
        self.requests: list[Seen] = []
        self._stop = threading.Event()
        service = self

        class _Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(self.command, parts.path, parse_qs(parts.query, keep_blank_values=True),
                            {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length) if length else b"")
                service.requests.append(seen)
                route = service.routes.get((self.command, parts.path))
                reply = Reply(404, {"error": f"no route for {self.command} {parts.path}"}) if route is None else (
                    route if isinstance(route, Reply) else route(seen))
                if reply.delay and service._stop.wait(reply.delay):
                    return
                body, ctype = reply.body, reply.content_type
                if isinstance(body, (dict, list)):
                    body, ctype = json.dumps(body).encode(), ctype or "application/json"
                elif isinstance(body, str):
                    body, ctype = body.encode(), ctype or "text/plain; charset=utf-8"
                body = body or b""
                try:
                    self.send_response(reply.status)
                    if ctype:
                        self.send_header("Content-Type", ctype)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass                        # the client gave up (a timeout test)

            do_GET = do_POST = do_PUT = _serve

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def on(self, method: str, path: str, answer: Handler | Reply) -> None:
        self.routes[(method, path)] = answer

    def start(self) -> "FakeService":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- running tools through the real compiler and runtime ------------------------------------

class RecordingModel(ScriptedChatModel):
    """The scripted model, keeping the messages of every call (to see what the model read)."""

    calls: list = []

    async def _astream(self, messages, *args, **kwargs):
        RecordingModel.calls.append(list(messages))
        async for chunk in super()._astream(messages, *args, **kwargs):
            yield chunk

    def _generate(self, messages, *args, **kwargs):
        RecordingModel.calls.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    async def _agenerate(self, messages, *args, **kwargs):
        RecordingModel.calls.append(list(messages))
        return await super()._agenerate(messages, *args, **kwargs)


class RecordingFactory(ModelFactory):
    def __init__(self, script: Script):
        super().__init__(script=script)
        self._script = script

    def chat_model(self, llm_id, *, component_id=None, gen_conf=None):
        return RecordingModel(script=self._script, component_id=component_id)


async def run_turn(dsl: dict, query: str, script: dict | list | None = None) -> list[dict]:
    """One turn of `dsl` through the compiler, LangGraph and the event adapter; the events it emitted."""
    compiled = compile_dsl(dsl)
    s = Script.load(script if script is not None else {"auto_reply": "ok"})
    RecordingModel.calls = []
    async with open_checkpointer(None) as saver:
        runner = Runner(compiled, saver, RecordingFactory(s), s)
        return [e async for e in runner.run_turn("s", TurnRequest(query=query))]


def node_dsl(cid: str, component_name: str, params: dict, show: str = "formalized_content") -> dict:
    """Begin -> the tool -> a Message showing one of its outputs."""
    return {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": [cid]},
        cid: {"obj": {"component_name": component_name, "params": params}, "downstream": ["Message:Show"]},
        "Message:Show": {"obj": {"component_name": "Message", "params": {"content": [f"{{{cid}@{show}}}"]}},
                         "downstream": []},
    }}


CODE_TOOL = {"component_name": "CodeExec", "name": "CodeExec", "params": {}}     # CodeExec as an Agent tool


def agent_dsl(tool: dict, *, cite: bool = True) -> dict:
    """Begin -> an Agent with one tool -> a Message streaming the Agent's answer."""
    return {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Agent:A"]},
        "Agent:A": {"obj": {"component_name": "Agent", "params": {
            "llm_id": "m@OpenAI", "sys_prompt": "Answer with the tools.", "cite": cite,
            "prompts": [{"role": "user", "content": "{sys.query}"}], "tools": [tool]}}, "downstream": ["Message:M"]},
        "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{Agent:A@content}"]}},
                      "downstream": []},
    }}


def finished(events: list[dict], cid: str) -> dict:
    """The data of `cid`'s node_finished event."""
    return next(e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == cid)


def message_end(events: list[dict]) -> dict:
    return next(e["data"] for e in events if e["event"] == "message_end")


def tool_messages() -> list[str]:
    """What the model read back from tools during the turn, in order (each result once)."""
    seen: list[str] = []
    for call in RecordingModel.calls:
        for m in call:
            if m.type == "tool" and m.content not in seen:
                seen.append(m.content)
    return seen


def route_requests_to(monkeypatch, fake: FakeService, *hosts: str) -> None:
    """Send a library's HTTP calls for `hosts` to the fake service instead. AkShare and pywencai are
    libraries with their hosts written in; their HTTP layers (requests' adapter, curl_cffi's session)
    are moved to 127.0.0.1, and everything above them runs as it is."""
    import requests.adapters

    def moved(url: str) -> str | None:
        parts = urlsplit(url)
        if parts.hostname not in hosts:
            return None
        return f"{fake.url}{parts.path}" + (f"?{parts.query}" if parts.query else "")

    send = requests.adapters.HTTPAdapter.send

    def routed_send(adapter, request, *args, **kwargs):
        target = moved(request.url)
        if target:
            request.url = target
            for name in ("host", "Host"):
                request.headers.pop(name, None)
        return send(adapter, request, *args, **kwargs)

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", routed_send)
    try:
        from curl_cffi.requests import Session
    except ImportError:
        return
    curl_request = Session.request

    def routed_request(session, method, url, *args, **kwargs):
        target = moved(url)
        if target:
            headers = {k: v for k, v in (kwargs.get("headers") or {}).items() if k.lower() != "host"}
            kwargs["headers"] = headers
            url = target
        return curl_request(session, method, url, *args, **kwargs)

    monkeypatch.setattr(Session, "request", routed_request)
