"""The step trace of a session over HTTP, forks from its steps, and RAGFlow's logs and rerun routes.

Each test module runs one real server per database (SQLite file, PostgreSQL) with two tenants.
"""
from __future__ import annotations

import uuid

import pytest

from tests.server.helpers import SCRIPT, Api, Server, cpn, make_token, texts

# begin -> LLM:Kind -> Switch:S -- the query names RAGFlow --> Agent:T (a KB-search tool) -> Message:M
#                                \-- else ------------------> Message:E ("chat: <LLM:Kind's answer>")
RETRIEVAL_TOOL = {"component_name": "Retrieval", "name": "KB search", "params": {"dataset_ids": ["kb-1"]}}
ROUTER_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:Kind"]),
    "LLM:Kind": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "sys_prompt": "Say search or chat.",
                            "prompts": [{"role": "user", "content": "{sys.query}"}]}, ["Switch:S"]),
    "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["Agent:T"], "items": [
        {"cpn_id": "sys.query", "operator": "contains", "value": "RAGFlow"}]}], "end_cpn_ids": ["Message:E"]},
        ["Agent:T", "Message:E"]),
    "Agent:T": cpn("Agent", {"llm_id": "gpt-4o@OpenAI", "sys_prompt": "Use the KB.", "cite": False, "max_rounds": 3,
                             "prompts": [{"role": "user", "content": "{sys.query}"}], "tools": [RETRIEVAL_TOOL]},
                   ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{Agent:T@content}"]}),
    "Message:E": cpn("Message", {"content": ["chat: {LLM:Kind@content}"]}),
}}
ROUTER_SCRIPT = {
    **SCRIPT,
    "by_component": {
        **SCRIPT["by_component"],
        # every turn gets a fresh copy of the script: the Agent calls the tool, then answers
        "LLM:Kind": ["chat"],
        "Agent:T": [{"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "RAGFlow"}}]},
                    "RAGFlow is a RAG engine."],
    },
    "retrieval": [{"content": "RAGFlow is an open-source RAG engine.", "docnm_kwd": "intro.md", "doc_id": "d1"}],
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trace")
    if request.param == "sqlite":
        db = str(tmp / "server.db")
    else:
        from tests.runtime.checkpointers import postgres_url
        db = postgres_url()
    with Server(db, tmp, ROUTER_SCRIPT) as server:
        alice = Api(server, make_token(db, f"alice-{uuid.uuid4().hex[:6]}"))
        bob = Api(server, make_token(db, f"bob-{uuid.uuid4().hex[:6]}"))
        yield server, alice, bob
        alice.close()
        bob.close()


def ask(api: Api, agent_id: str, session_id: str, query: str) -> list[dict]:
    return api.stream("/agents/chat/completions", {"agent_id": agent_id, "session_id": session_id, "query": query,
                                                    "stream": True})


def two_turns(api: Api) -> tuple[str, str, list[list[dict]]]:
    agent_id = api.agent(ROUTER_DSL)
    session_id = api.session(agent_id)["id"]
    return agent_id, session_id, [ask(api, agent_id, session_id, q) for q in ("What is RAGFlow?", "Hi there")]


def trace_of(api: Api, agent_id: str, session_id: str) -> dict:
    return api.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace")


def test_the_trace_lists_every_step_of_both_turns(served):
    _, alice, _ = served
    agent_id, session_id, runs = two_turns(alice)
    trace = trace_of(alice, agent_id, session_id)
    assert trace["session_id"] == session_id and trace["agent_id"] == agent_id
    first, second = trace["turns"]
    assert [t["query"] for t in trace["turns"]] == ["What is RAGFlow?", "Hi there"]
    assert [t["status"] for t in trace["turns"]] == ["finished", "finished"]
    assert [t["message_id"] for t in trace["turns"]] == [runs[0][0]["message_id"], runs[1][0]["message_id"]]
    assert [s["component_id"] for s in first["steps"]] == ["begin", "LLM:Kind", "Switch:S", "Agent:T", "Message:M"]
    assert [s["component_id"] for s in second["steps"]] == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    for step in first["steps"] + second["steps"]:
        assert step["checkpoint_id"] and step["elapsed"] >= 0 and step["error"] is None
    llm = first["steps"][1]
    assert llm["inputs"] == {"sys.query": "What is RAGFlow?"} and llm["outputs"]["content"] == "chat"
    assert llm["messages"][0] == {"role": "system", "content": "Say search or chat."}
    assert llm["messages"][-1] == {"role": "user", "content": "What is RAGFlow?"}
    assert llm["usage"]["total_tokens"] > 0 and llm["usage"]["calls"] == 1
    switch = first["steps"][2]
    assert switch["outputs"]["_next"] == ["Agent:T"] and "messages" not in switch and "tool_calls" not in switch
    agent = first["steps"][3]
    assert agent["outputs"]["content"] == "RAGFlow is a RAG engine."      # the streamed generation's final text
    assert agent["messages"][-1] == {"role": "user", "content": "What is RAGFlow?"}
    assert agent["usage"]["calls"] == 2
    [call] = agent["tool_calls"]
    assert call["name"] == "search_my_dateset_0" and call["arguments"] == {"query": "RAGFlow"}
    assert "RAGFlow is an open-source RAG engine." in call["result"]
    assert second["steps"][3]["outputs"]["content"] == "chat:chat"      # RAGFlow drops the space before a reference


def refused_as_unknown(theirs, unused) -> bool:
    """Another tenant's id is answered exactly as an id nobody uses: RAGFlow's "not found" (code 102)."""
    return (theirs.status_code == unused.status_code and theirs.json()["code"] == unused.json()["code"] == 102
            and "not found" in theirs.json()["message"] and "not found" in unused.json()["message"])


def test_another_tenant_gets_what_an_unknown_id_gets(served):
    _, alice, bob = served
    agent_id, session_id, runs = two_turns(alice)
    checkpoint = trace_of(alice, agent_id, session_id)["turns"][1]["steps"][1]["checkpoint_id"]
    assert refused_as_unknown(bob.http.get(f"/agents/{agent_id}/sessions/{session_id}/trace"),
                              alice.http.get(f"/agents/{agent_id}/sessions/no-such-session/trace"))
    assert refused_as_unknown(
        bob.http.post(f"/agents/{agent_id}/sessions/{session_id}/fork", json={"checkpoint_id": checkpoint}),
        alice.http.post(f"/agents/{agent_id}/sessions/no-such-session/fork", json={"checkpoint_id": checkpoint}))
    assert refused_as_unknown(bob.http.get(f"/agents/{agent_id}/logs/{runs[0][0]['message_id']}"),
                              alice.http.get(f"/agents/no-such-agent/logs/{runs[0][0]['message_id']}"))
    assert refused_as_unknown(
        bob.http.post("/agents/rerun", json={"id": runs[0][0]["message_id"], "component_id": "LLM:Kind"}),
        alice.http.post("/agents/rerun", json={"id": "no-such-message", "component_id": "LLM:Kind"}))
    assert trace_of(alice, agent_id, session_id)["turns"][1]["steps"][1]["checkpoint_id"] == checkpoint
