"""A real `canvas2graph serve` process on 127.0.0.1 and small clients for its API.

Servers run as separate processes (so tests can stop, kill and restart them, and run two on one
database) with a scripted model (`--llm-script`, a fresh copy per turn). Tokens are made with the
real `canvas2graph tokens create` command. Both are forked from a warm Python (tests/forkserver.py), which
spares each the seconds of imports a new interpreter costs.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx

from tests import forkserver

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "canvas2graph.cli"]
SSE_STREAM = re.compile(r"^(data:\{.*?\}\n\n)*data:\[DONE\]\n\n$", re.S)

# The script every test server answers with: fixed replies for the components the tests name,
# "Answer <n> from <component>." for the others.
SCRIPT = {
    "by_component": {"LLM:Draft": ["Coffee: wake up to flavor."], "LLM:Final": ["Coffee: bold mornings."],
                     "LLM:Fails": [{"error": "the provider is down"}]},
    "auto_reply": "Answer {n} from {component}.",
    "stream_chunks": 3,
}
# A model that takes its time: each streamed piece (one word) 250 ms apart, so a test can act mid-turn.
SLOW_SCRIPT = {**SCRIPT, "stream_chunks": 50, "chunk_interval_ms": 250}


def cpn(name: str, params: dict | None = None, downstream: list | None = None) -> dict:
    return {"obj": {"component_name": name, "params": params or {}}, "downstream": downstream or []}


# begin -> LLM:A -> Message:M ("Turn <n>: <answer>")
CHAT_DSL = {"components": {
    "begin": cpn("Begin", {"prologue": "Hello! Ask me anything."}, ["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                 ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Turn {sys.conversation_turns}: {LLM:A@content}"]}),
}}

# begin -> LLM:Draft -> UserFillUp:Ask (pauses for `feedback`) -> LLM:Final -> Message:Out
FEEDBACK_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:Draft"]),
    "LLM:Draft": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "Slogan: {sys.query}"}]},
                     ["UserFillUp:Ask"]),
    "UserFillUp:Ask": cpn("UserFillUp", {"enable_tips": True, "tips": "Draft: {LLM:Draft@content}\nAny feedback?",
                                         "inputs": {"feedback": {"type": "line", "name": "Feedback", "optional": False}}},
                          ["LLM:Final"]),
    "LLM:Final": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [
        {"role": "user", "content": "Rewrite {LLM:Draft@content} with {UserFillUp:Ask@feedback}"}]}, ["Message:Out"]),
    "Message:Out": cpn("Message", {"content": ["{LLM:Final@content}"]}),
}}
DRAFT, FINAL = "Coffee: wake up to flavor.", "Coffee: bold mornings."
TIPS = f"Draft: {DRAFT}\nAny feedback?"

# begin -> LLM:A -> Message:M1 -> LLM:B -> Message:M2: two streamed answers, so a turn has a node
# boundary between them
TWO_STEP_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                 ["Message:M1"]),
    "Message:M1": cpn("Message", {"content": ["{LLM:A@content}"]}, ["LLM:B"]),
    "LLM:B": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "more"}]}, ["Message:M2"]),
    "Message:M2": cpn("Message", {"content": ["{LLM:B@content}"]}),
}}

def chat_answer(turn: int) -> str:
    """CHAT_DSL's streamed answer. RAGFlow drops the spaces next to a reference in streamed Message text
    (SPEC section 10), and canvas2graph does the same."""
    return f"Turn{turn}:Answer 1 from LLM:A."


# begin -> LLM:Fails (its model call fails) -> Message:M
FAILING_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:Fails"]),
    "LLM:Fails": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                     ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{LLM:Fails@content}"]}),
}}

BROKEN_DSL = {"components": {
    "begin": cpn("Begin", {}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{LLM:Missing@content}"]}),
}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`canvas2graph serve` in its own process (`proc`: Popen-like, tests/forkserver.py)."""

    def __init__(self, db: str, tmp: Path, script: dict | None = None, *extra: str, env: dict | None = None):
        self.db, self.tmp = db, tmp
        # processes of one test share a job queue (and its turns); another test's, on the same database, do not
        self.queue = "test-" + hashlib.sha1(str(tmp).encode()).hexdigest()[:12]
        self.env = env          # the server's environment (default: this process's)
        self.script_path = tmp / f"script-{uuid.uuid4().hex[:8]}.json"
        self.script_path.write_text(json.dumps(script or SCRIPT))
        self.extra = list(extra)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log = tmp / f"server-{uuid.uuid4().hex[:8]}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Server":
        self.port = free_port()
        env = {**(os.environ if self.env is None else self.env), "PYTHONPATH": str(REPO)}
        env.pop("CANVAS2GRAPH_LLM_SCRIPT", None)
        with open(self.log, "ab") as log:
            self.proc = forkserver.shared().spawn(
                CLI[1:] + ["serve", "--port", str(self.port), "--db", self.db, "--llm-script", str(self.script_path),
                           "--queue", self.queue, "--log-level", "warning", *self.extra],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"the server did not answer within 60 s:\n{self.log.read_text()}")

    def stop(self) -> None:
        """A graceful stop (SIGTERM), as a service manager does."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: the process dies wherever it is."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class Worker(Server):
    """`canvas2graph worker` in its own process: runs the turns `serve --workers 0` processes queue on PostgreSQL.
    Ready once its `/ready` probe answers (its worker takes jobs)."""

    def start(self) -> "Worker":
        self.port = free_port()
        env = {**(os.environ if self.env is None else self.env), "PYTHONPATH": str(REPO)}
        env.pop("CANVAS2GRAPH_LLM_SCRIPT", None)
        with open(self.log, "ab") as log:
            self.proc = forkserver.shared().spawn(
                CLI[1:] + ["worker", "--db", self.db, "--llm-script", str(self.script_path), "--health-port",
                           str(self.port), "--queue", self.queue, "--log-level", "warning", *self.extra],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the worker exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(self.url + "/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"the worker was not ready within 60 s:\n{self.log.read_text()}")


def make_token(db: str, tenant: str) -> str:
    out = subprocess.run([*forkserver.shared().command.split(), *CLI[1:], "tokens", "create", "--tenant", tenant,
                          "--db", db], cwd=REPO,
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return out.stdout.strip()


class Api:
    """One tenant's view of a server: RAGFlow's envelope in, parsed JSON out."""

    def __init__(self, server: Server, token: str):
        self.server, self.token = server, token
        self.http = httpx.Client(base_url=server.url + "/api/v1", timeout=60,
                                 headers={"Authorization": f"Bearer {token}"})

    def call(self, method: str, path: str, body: Any = None, **kw) -> dict:
        response = self.http.request(method, path, json=body, **kw)
        return response.json()

    def ok(self, method: str, path: str, body: Any = None, **kw) -> Any:
        reply = self.call(method, path, body, **kw)
        assert reply["code"] == 0, reply
        return reply["data"]

    def agent(self, dsl: dict, title: str | None = None) -> str:
        return self.ok("POST", "/agents", {"title": title or f"agent-{uuid.uuid4().hex[:8]}", "dsl": dsl})["id"]

    def session(self, agent_id: str) -> dict:
        return self.ok("POST", f"/agents/{agent_id}/sessions", {})

    def stream_text(self, path: str, body: dict | None, method: str = "POST") -> str:
        with self.http.stream(method, path, json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            return response.read().decode()

    def stream(self, path: str, body: dict | None, method: str = "POST") -> list[dict]:
        """The events of an SSE reply, after checking RAGFlow's framing."""
        text = self.stream_text(path, body, method)
        assert SSE_STREAM.match(text), text[-500:]
        return [json.loads(frame[len("data:"):]) for frame in text.split("\n\n") if frame and frame != "data:[DONE]"]

    def iter_events(self, path: str, body: dict) -> Iterator[dict]:
        """Events as they arrive; closing the generator closes the connection."""
        with self.http.stream("POST", path, json=body) as response:
            buffer = ""
            for text in response.iter_text():
                buffer += text
                while "\n\n" in buffer:
                    frame, buffer = buffer.split("\n\n", 1)
                    if frame != "data:[DONE]":
                        yield json.loads(frame[len("data:"):])

    def close(self) -> None:
        self.http.close()


def wait_for(predicate, timeout: float = 30.0, what: str = "the condition"):
    """Poll until `predicate()` returns something truthy (a behaviour with a time limit, not a timing claim)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def first_message(events) -> dict:
    """Read a live stream up to its first `message` event (the turn is then inside its first Message); the
    stream's first event."""
    started = None
    for event in events:
        started = started or event
        if event["event"] == "message":
            return started
    raise AssertionError("the stream ended before any message")


def new_tenant() -> str:
    return f"tenant-{uuid.uuid4().hex[:8]}"


def texts(events: list[dict]) -> str:
    return "".join(e["data"].get("content", "") for e in events if e.get("event") == "message")
