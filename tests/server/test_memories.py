"""RAGFlow's memories on canvas2graph's server (issue 35): ragflow-sdk 0.27.3 creates a memory, an agent's Message
saves each exchange to it, another agent's Retrieval answers from it in a new session, typed memories are extracted
after the turn by the memory's (scripted) chat model, and each tenant sees its own memories only."""
from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import Api, Server, Worker, cpn, make_token, new_tenant, wait_for

EXTRACTED = {"semantic": [{"content": "The user drinks green tea every morning.", "valid_at": "", "invalid_at": ""}]}
# the memory's chat model, asked to extract from an exchange: answers by what the exchange says
SCRIPT = {"by_message": [{"match": "Exchange:[\\s\\S]*green tea", "reply": {"content": json.dumps(EXTRACTED)}}],
          "auto_reply": "{}"}


def saver_dsl(memory_id: str) -> dict:
    """begin -> Message "Noted: <query>", saved to the memory."""
    return {"components": {
        "begin": cpn("Begin", {}, ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["Noted: {sys.query}"], "memory_ids": [memory_id]}),
    }}


def reader_dsl(memory_id: str) -> dict:
    """begin -> Retrieval from the memory -> Message "Remembered: <what it found>"."""
    return {"components": {
        "begin": cpn("Begin", {}, ["Retrieval:R"]),
        "Retrieval:R": cpn("Retrieval", {"query": "{sys.query}", "retrieval_from": "memory", "memory_ids": [memory_id],
                                         "similarity_threshold": 0.1, "empty_response": "nothing remembered"},
                           ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["Remembered: {Retrieval:R@formalized_content}"]}),
    }}


SDK_SCRIPT = r"""
import json, sys
from ragflow_sdk import RAGFlow
token, other_token, url, saver, reader = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
rag, other = RAGFlow(api_key=token, base_url=url), RAGFlow(api_key=other_token, base_url=url)
out = {}
memory = rag.create_memory(name="habits", memory_type=["raw", "semantic"], embd_id="", llm_id="tea@OpenAI")
out["memory"] = [memory.name, memory.memory_type, memory.memory_size]
rag.create_agent(title="saver", dsl=json.loads(saver.replace("MEMORY", memory.id)))
rag.create_agent(title="reader", dsl=json.loads(reader.replace("MEMORY", memory.id)))
agents = {a.title: a for a in rag.list_agents(page_size=100)}
said = list(agents["saver"].create_session().ask("I drink green tea every morning", stream=False))
out["said"] = [m.content for m in said]
out["recent"] = [m["content"] for m in rag.get_recent_messages([memory.id])]
out["search"] = [m["content"] for m in rag.search_message("what do I drink in the morning", [memory.id])]
out["answer"] = [m.content for m in agents["reader"].create_session().ask("what tea do I drink?", stream=False)]
out["added"] = rag.add_message([memory.id], "agent-x", "session-x", "My dog is called Rex", "A fine name.")
out["dog"] = [m["content"] for m in rag.search_message("dog name", [memory.id], agent_id="agent-x")]
out["listed"] = [m.name for m in rag.list_memory()["memory_list"]]
out["other_listed"] = [m.name for m in other.list_memory()["memory_list"]]
out["other_search"] = other.search_message("green tea", [memory.id])
out["other_recent"] = other.get_recent_messages([memory.id])
try:
    other.delete_memory(memory.id)
    out["other_delete"] = "deleted"
except Exception as e:
    out["other_delete"] = str(e)
out["messages"] = memory.list_memory_messages()["messages"]["total_count"]
out["config"] = memory.get_config().name
rag.delete_memory(memory.id)
out["after_delete"] = [m.content for m in agents["reader"].create_session().ask("what tea do I drink?", stream=False)]
out["after_listed"] = [m.name for m in rag.list_memory()["memory_list"]]
print(json.dumps(out))
"""


def _layout(layout: str, tmp_path) -> tuple[str, list[Server]]:
    """SQLite: one `serve` runs everything; PostgreSQL: `serve --workers 0` and a `worker` that runs the turns and
    the extraction."""
    if layout == "embedded":
        db = str(tmp_path / "server.db")
        return db, [Server(db, tmp_path, SCRIPT).start()]
    db = postgres_url()
    return db, [Server(db, tmp_path, SCRIPT, "--workers", "0").start(), Worker(db, tmp_path, SCRIPT).start()]


@pytest.mark.parametrize("layout", ["embedded", "postgres"])
def test_ragflow_sdk_027_memories_saved_by_one_agent_answer_another(tmp_path, sdk027_python, layout):
    db, processes = _layout(layout, tmp_path)
    try:
        token, other = make_token(db, new_tenant()), make_token(db, new_tenant())
        run = subprocess.run([sdk027_python, "-c", SDK_SCRIPT, token, other, processes[0].url,
                              json.dumps(saver_dsl("MEMORY")), json.dumps(reader_dsl("MEMORY"))],
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr + processes[0].log.read_text()[-3000:]
    finally:
        for process in processes:
            process.kill()
    out = json.loads(run.stdout)
    assert out["memory"] == ["habits", ["raw", "semantic"], 5 * 1024 * 1024]
    assert out["said"] == ["Noted:I drink green tea every morning"]  # spaces next to a reference go, as in RAGFlow
    exchange = "User Input: I drink green tea every morning\nAgent Response: Noted:I drink green tea every morning"
    assert exchange in out["recent"]
    assert out["search"][0] == exchange or out["search"][0] == EXTRACTED["semantic"][0]["content"]
    assert "green tea" in out["answer"][0] and out["answer"][0].startswith("Remembered:")
    assert out["added"] == "All add to task."
    assert out["dog"] == ["User Input: My dog is called Rex\nAgent Response: A fine name."]
    assert out["listed"] == ["habits"] and out["other_listed"] == []
    assert out["other_search"] == [] and out["other_recent"] == []
    assert "not found" in out["other_delete"]
    assert out["messages"] == 2 and out["config"] == "habits"
    assert "green tea" not in out["after_delete"][0]
    assert out["after_listed"] == []


def _memory(api: Api, *types: str, llm_id: str = "tea@OpenAI") -> str:
    return api.ok("POST", "/memories", {"name": f"m-{uuid.uuid4().hex[:6]}", "memory_type": ["raw", *types],
                                        "embd_id": "", "llm_id": llm_id})["id"]


def _ask(api: Api, agent_id: str, question: str) -> str:
    reply = api.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "question": question, "stream": False})
    return reply["answer"] if "answer" in reply else reply["data"]["content"]


def _semantic(api: Api, memory_id: str) -> list[str]:
    return [m["content"] for m in api.ok("GET", "/messages", params={"memory_id": memory_id, "limit": 50})
            if m["message_type"] == "semantic"]


def test_typed_memories_are_extracted_after_the_turn_on_the_embedded_server(server, alice):
    # the module's server answers every model call from the default script: the memory's model is asked
    # nothing it knows, so this memory keeps raw messages only and the turn is the check
    memory_id = _memory(alice)
    agent_id = alice.agent(saver_dsl(memory_id))
    session = alice.session(agent_id)
    events = alice.stream("/agents/chat/completions", {"agent_id": agent_id, "session_id": session["id"],
                                                       "question": "remember this", "stream": True})
    assert events[-1]["event"] == "workflow_finished"
    recent = alice.ok("GET", "/messages", params={"memory_id": memory_id})
    assert [m["session_id"] for m in recent] == [session["id"]]
    assert recent[0]["agent_id"] == agent_id and recent[0]["message_type"] == "raw"


def test_a_message_saving_to_a_memory_that_does_not_exist_fails_clearly(server, alice):
    agent_id = alice.agent(saver_dsl("no-such-memory"))
    session = alice.session(agent_id)
    events = alice.stream("/agents/chat/completions", {"agent_id": agent_id, "session_id": session["id"],
                                                       "question": "remember this", "stream": True})
    # the answer was streamed; the Message then fails, as a component does (RAGFlow's error event)
    assert "".join(e["data"].get("content", "") for e in events if e["event"] == "message") == "Noted:remember this"
    failed = events[-1]
    assert failed["event"] == "node_finished" and failed["data"]["component_id"] == "Message:M"
    assert failed["data"]["error"].startswith("params.memory_ids: Memory ['no-such-memory'] not found.")


def test_the_memory_api_refuses_bad_requests_naming_the_field(server, alice, bob):
    assert alice.call("POST", "/memories", {"name": " ", "memory_type": ["raw"], "embd_id": "", "llm_id": ""})[
        "message"] == "Memory name cannot be empty or whitespace."
    reply = alice.call("POST", "/memories", {"name": "x", "memory_type": ["raw", "dreams"], "embd_id": "", "llm_id": ""})
    assert reply["code"] == 101 and "dreams" in reply["message"]
    assert "memory_type" in alice.call("POST", "/memories", {"name": "x"})["message"]
    memory_id = _memory(alice)
    assert "Memory size" in alice.call("PUT", f"/memories/{memory_id}", {"memory_size": 10 ** 9})["message"]
    assert alice.call("PUT", f"/messages/{memory_id}:1", {"status": "yes"})["message"] == "Status must be a boolean."
    assert alice.call("GET", f"/messages/{memory_id}:oops/content")["code"] == 101
    assert bob.call("GET", f"/memories/{memory_id}/config")["code"] == 404
    assert alice.call("GET", "/messages")["message"] == "memory_ids is required."


@pytest.mark.parametrize("layout", ["embedded", "postgres"])
def test_a_worker_extracts_typed_memories_after_the_turn(tmp_path, layout):
    """SQLite: `serve` runs turns and extraction; PostgreSQL: `serve --workers 0` queues, a `worker` extracts."""
    db, processes = _layout(layout, tmp_path)
    try:
        api = Api(processes[0], make_token(db, new_tenant()))
        memory_id = _memory(api, "semantic")
        agent_id = api.agent(saver_dsl(memory_id))
        assert _ask(api, agent_id, "I drink green tea every morning") == "Noted:I drink green tea every morning"
        wait_for(lambda: _semantic(api, memory_id), what="the semantic memory")
        assert _semantic(api, memory_id) == [EXTRACTED["semantic"][0]["content"]]
        listed = api.ok("GET", f"/memories/{memory_id}")["messages"]["message_list"]
        assert [x["message_type"] for x in listed[0]["extract"]] == ["semantic"]
        # the reader finds the typed memory too
        reader = api.agent(reader_dsl(memory_id))
        assert "green tea" in _ask(api, reader, "what do I drink in the morning?")
    finally:
        for process in processes:
            process.kill()


def test_an_agent_naming_a_memory_that_does_not_exist_is_warned_of(server, alice):
    memory_id = _memory(alice)
    dsl = reader_dsl("no-such-memory")
    dsl["components"]["Message:M"]["obj"]["params"]["memory_ids"] = [memory_id]     # this one exists
    created = alice.ok("POST", "/agents", {"title": "warned", "dsl": dsl})
    assert created["compiles"] is True
    warnings = [d for d in created["diagnostics"] if d["code"] == "unknown-memory"]
    assert warnings == [{"code": "unknown-memory", "severity": "warning", "component_id": "Retrieval:R",
                         "field": "params.memory_ids", "message": warnings[0]["message"]}]
    assert "'no-such-memory'" in warnings[0]["message"]
    assert [d["code"] for d in alice.ok("GET", f"/agents/{created['id']}")["diagnostics"]] == ["unknown-memory"]


def test_a_retrieval_of_a_memory_without_an_embedding_model_is_told_it_ranks_by_words(server, alice):
    memory_id = _memory(alice)          # no embd_id
    created = alice.ok("POST", "/agents", {"title": "words", "dsl": reader_dsl(memory_id)})
    [told] = [d for d in created["diagnostics"] if d["code"] == "memory-ranked-by-text"]
    assert (told["component_id"], told["field"], told["severity"]) == ("Retrieval:R", "params.memory_ids", "warning")
    assert "no embedding model" in told["message"]
