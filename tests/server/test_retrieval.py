"""Retrieval behind the server: the embedded store beside the server's database, cited in the replies."""
from __future__ import annotations

import json
import subprocess

import openai
import pytest

from tests.server.helpers import CLI, REPO, Api, Server, make_token

QUESTION = "I was charged twice for my order"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kb")
    db = str(tmp / "sessions.db")
    index = subprocess.run(CLI + ["index", "fixtures/kb/docs", "--kb", "support-kb", "--db", db, "--quiet"],
                           cwd=REPO, capture_output=True, text=True)
    assert index.returncode == 0, index.stderr
    script = json.loads((REPO / "fixtures/kb/kb_answer.script.json").read_text())
    with Server(db, tmp, script) as server:
        api = Api(server, make_token(db, "kb-tenant"))
        api.agent_id = api.agent(json.loads((REPO / "fixtures/kb/kb_answer.json").read_text()))
        yield api
        api.close()


def test_message_end_carries_the_cited_chunks_and_the_log_keeps_them(kb):
    sid = kb.session(kb.agent_id)["id"]
    events = kb.stream("/agents/chat/completions", {"agent_id": kb.agent_id, "session_id": sid, "query": QUESTION,
                                                    "stream": True})
    end = next(e for e in events if e["event"] == "message_end")
    assert end["data"]["reference"]["chunks"]["300"]["document_name"] == "refunds.md"
    log = kb.ok("GET", f"/agents/{kb.agent_id}/sessions/{sid}")["messages"]
    assert log[-1]["reference"] == list(end["data"]["reference"]["chunks"].values())


def test_json_replies_merge_the_references(kb):
    data = kb.ok("POST", "/agents/chat/completions", {"agent_id": kb.agent_id, "query": QUESTION})
    assert data["data"]["reference"]["chunks"]["300"]["document_name"] == "refunds.md"
    assert "[ID:300]" in data["data"]["content"]


def test_openai_replies_carry_the_reference(kb):
    client = openai.OpenAI(api_key=kb.token, base_url=f"{kb.server.url}/api/v1/agents_openai/{kb.agent_id}",
                           max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="m", messages=[{"role": "user", "content": QUESTION}])
    message = json.loads(raw.http_response.text)["choices"][0]["message"]
    assert message["reference"]["chunks"]["300"]["document_name"] == "refunds.md"
