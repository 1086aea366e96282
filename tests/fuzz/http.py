"""HTTP fuzzing: generated requests against a real `canvas2graph serve` on 127.0.0.1.

Property: no request gets a 500, every error is RAGFlow's envelope (`code` and `message`), and the
server answers `/health` afterwards. Bodies are generated DSLs, any JSON, broken bytes; paths and
query strings come from the API's routes with hostile ids and parameters.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import httpx
from hypothesis import strategies as st

from tests.fuzz import strategies as S

ROUTES = [
    ("POST", "/api/v1/graphs/compile"), ("POST", "/api/v1/graphs/export"), ("POST", "/api/v1/graphs/run"),
    ("POST", "/api/v1/agents"), ("GET", "/api/v1/agents"), ("GET", "/api/v1/agents/{id}"),
    ("PUT", "/api/v1/agents/{id}"), ("DELETE", "/api/v1/agents/{id}"), ("POST", "/api/v1/agents/{id}/sessions"),
    ("GET", "/api/v1/agents/{id}/sessions"), ("GET", "/api/v1/agents/{id}/sessions/{id}"),
    ("DELETE", "/api/v1/agents/{id}/sessions"), ("POST", "/api/v1/agents/chat/completions"),
    ("POST", "/api/v1/agents/{id}/completions"), ("POST", "/api/v1/agents_openai/{id}/chat/completions"),
    ("POST", "/api/v1/tasks/{id}/cancel"),
    ("POST", "/api/v1/memories"), ("GET", "/api/v1/memories"), ("PUT", "/api/v1/memories/{id}"),
    ("GET", "/api/v1/memories/{id}"), ("DELETE", "/api/v1/memories/{id}"), ("GET", "/api/v1/memories/{id}/config"),
    ("POST", "/api/v1/messages"), ("GET", "/api/v1/messages"), ("GET", "/api/v1/messages/search"),
    ("PUT", "/api/v1/messages/{id}:{id}"), ("DELETE", "/api/v1/messages/{id}:1"),
    ("GET", "/api/v1/messages/{id}:{id}/content"),
]
IDS = ["x", "0" * 32, "%ED%A0%80", "%FF", "..", "a" * 300, "%00", "%F0%9F%98%80", "9" * 25]
FIELDS = ["dsl", "query", "question", "title", "inputs", "session_id", "agent_id", "stream", "messages", "files",
          "user_id", "format", "openai-compatible", "id", "ids", "delete_all", "name", "memory_type", "embd_id",
          "llm_id", "memory_id", "user_input", "agent_response", "status", "memory_size", "temperature"]


@st.composite
def requests(draw) -> tuple[str, str, dict, bytes]:
    method, path = draw(st.sampled_from(ROUTES))
    path = path.replace("{id}", draw(st.sampled_from(IDS)))
    params = draw(st.dictionaries(st.sampled_from(["page", "page_size", "desc", "orderby", "id", "title", "dsl",
                                                   "memory_id", "query", "top_n", "limit", "similarity_threshold"]),
                                  st.sampled_from(["1", "0", "-1", "99999999999999999999", "x", "", "1e5"]), max_size=2))
    kind = draw(st.sampled_from(["object", "object", "object", "json", "bytes"]))
    if kind == "object":
        body: Any = draw(st.dictionaries(st.sampled_from(FIELDS), st.one_of(S.documents(), S.json_values(4)), max_size=4))
        if draw(st.booleans()):
            body["stream"] = False
        data = json.dumps(body, ensure_ascii=draw(st.booleans()), allow_nan=True).encode("utf-8", "surrogatepass")
    elif kind == "json":
        data = json.dumps(draw(S.json_values()), allow_nan=True).encode()
    else:
        data = draw(st.binary(max_size=64)) if draw(st.booleans()) else draw(S.texts_of()) or b""
        data = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    return method, path, params, data


def check_response(response: httpx.Response) -> str:
    assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}"
    if response.headers.get("content-type", "").startswith("application/json"):
        reply = response.json()
        assert isinstance(reply, dict) and "code" in reply, reply
        if reply["code"] != 0:
            assert isinstance(reply.get("message"), str) and reply["message"], reply
    return str(response.status_code)


class Target:
    """A real server and one tenant's client for the fuzzer."""

    def __init__(self):
        from tests.server.helpers import Server, make_token
        self.tmp = Path(tempfile.mkdtemp(prefix="c2g-fuzz-"))
        self.server = Server(str(self.tmp / "server.db"), self.tmp).start()
        token = make_token(self.server.db, "fuzz")
        self.client = httpx.Client(base_url=self.server.url, timeout=60,
                                   headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})

    def send(self, method: str, path: str, params: dict, data: bytes) -> str:
        response = self.client.request(method, path, params=params, content=data)
        outcome = check_response(response)
        assert self.client.get("/health").status_code == 200, "the server stopped answering"
        return outcome

    def close(self) -> None:
        self.client.close()
        self.server.stop()
        log = self.server.log.read_text(errors="replace")
        shutil.rmtree(self.tmp, ignore_errors=True)
        assert "unhandled error" not in log, log[-2000:]


def survey_http(examples: int, seed: int, survey) -> dict:
    from tests.fuzz.__main__ import _run
    target = Target()
    try:
        _run(st.tuples(requests()), examples, lambda r: survey.check(target.send, *r), seed)
    finally:
        target.close()
    return survey.report()
