"""LangGraph Server's API under `/langgraph`, driven by `langgraph-sdk`'s `get_client` unchanged, on SQLite
and PostgreSQL: assistants, threads, streamed runs in every served mode (a run streaming `events` and
`messages` cancelled mid-way), a second turn, a form answered by `command={"resume": ...}`, history, past
states, state updates and forks, stateless runs, background runs joined (also as a stream) and cancelled,
a thread deleted with its session, a thread continued and cancelled from another server process, and tenants
kept apart. How `events` and `messages` match LangGraph Server's: test_langgraph_parity.py."""
from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from tests.server.helpers import CHAT_DSL, DRAFT, FEEDBACK_DSL, FINAL, TIPS, Server, chat_answer
from tests.server.protocols.conftest import PACED_SCRIPT, long_dsl


def client(server, api):
    return get_client(url=server.url + "/langgraph", headers={"Authorization": f"Bearer {api.token}"})


def title() -> str:
    return f"Desk {uuid.uuid4().hex[:6]}"


async def stream(lg, thread_id: str, assistant: str, **run) -> dict[str, list]:
    parts: dict[str, list] = {}
    async for part in lg.runs.stream(thread_id, assistant, **run):
        parts.setdefault(part.event, []).append(part.data)
    return parts


async def test_assistants_are_the_tenants_agents_with_their_graph_and_schemas(server, alice):
    name = title()
    agent_id = alice.ok("POST", "/agents", {"title": name, "description": "Chats.", "dsl": CHAT_DSL})["id"]
    lg = client(server, alice)
    graph_id = name.lower().replace(" ", "_")
    [assistant] = await lg.assistants.search(graph_id=graph_id)
    assert assistant["assistant_id"] == agent_id and assistant["name"] == name and assistant["description"] == "Chats."
    assert (await lg.assistants.get(agent_id))["graph_id"] == graph_id
    drawn = await lg.assistants.get_graph(agent_id)
    assert {n["id"] for n in drawn["nodes"]} >= {"begin", "LLM.A", "Message.M"}
    assert {(e["source"], e["target"]) for e in drawn["edges"]} >= {("begin", "LLM.A"), ("LLM.A", "Message.M")}
    schemas = await lg.assistants.get_schemas(agent_id)
    assert set(schemas["input_schema"]["properties"]) == {"query", "inputs", "files", "user_id"}
    assert set(schemas["output_schema"]["properties"]) == {"answer", "outputs"}


async def test_a_streamed_run_shows_values_updates_tokens_and_debug_steps(server, alice):
    name = title()
    alice.agent(CHAT_DSL, name)
    lg = client(server, alice)
    thread = await lg.threads.create(metadata={"user": "ada"})
    parts = await stream(lg, thread["thread_id"], name.lower().replace(" ", "_"), input={"query": "Capital of France?"},
                         stream_mode=["values", "updates", "messages-tuple", "debug", "custom"])
    assert parts["metadata"][0]["run_id"]
    assert [node for update in parts["updates"] for node in update] == ["begin", "LLM.A", "Message.M"]
    tokens = [(chunk["content"], meta["component_id"]) for chunk, meta in parts["messages"]]
    assert "".join(text for text, _ in tokens) == "Answer 1 from LLM:A." and len(tokens) > 1
    assert {cid for _, cid in tokens} == {"Message:M"}
    assert parts["values"][-1]["answer"] == chat_answer(1)
    assert {d["type"] for d in parts["debug"]} >= {"checkpoint", "task", "task_result"}
    assert any(c.get("event") == "message" for c in parts["custom"])        # the components' own writes
    state = await lg.threads.get_state(thread["thread_id"])
    assert state["values"]["answer"] == chat_answer(1) and state["next"] == []
    found = await lg.threads.search(metadata={"user": "ada"})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]] and found[0]["status"] == "idle"


async def test_a_run_streaming_events_and_messages_is_cancelled_mid_way(server, alice):
    slow = alice.agent(long_dsl(), title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    parts: dict[str, list] = {}
    async for part in lg.runs.stream(thread, slow, input={"query": "go"}, stream_mode=["events", "messages"]):
        parts.setdefault(part.event, []).append(part.data)
        if part.event == "events" and part.data["event"] == "on_chat_model_end" and \
                sum(e["event"] == "on_chat_model_end" for e in parts["events"]) == 2:     # the second model's
            await lg.runs.cancel(thread, parts["metadata"][0]["run_id"])
    run_id = parts["metadata"][0]["run_id"]
    assert (await lg.runs.get(thread, run_id))["status"] == "interrupted"
    nodes = [e["name"] for e in parts["events"] if e["event"] == "on_chain_start" and e["parent_ids"] == [run_id]]
    assert nodes[:3] == ["begin", "LLM.S1", "LLM.S2"] and "Message.M" not in nodes and len(nodes) < 10
    # each model's answer came in pieces, each piece as the message so far (the cancel stopped the next model
    # at once: it may have started, but wrote nothing)
    ended = sum(e["event"] == "on_chat_model_end" for e in parts["events"])
    assert ended == 2 and len(parts["messages/metadata"]) == ended
    turns = alice.ok("GET", f"/agents/{slow}/sessions/{thread}/trace")["turns"]
    assert turns[-1]["status"] == "cancelled"


async def test_a_second_run_on_the_thread_continues_the_conversation_of_its_session(server, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    await lg.runs.wait(thread, agent_id, input={"query": "first"})
    second = await lg.runs.wait(thread, agent_id, input={"messages": [{"role": "user", "content": "second"}]})
    assert second["answer"] == chat_answer(2)
    session = alice.ok("GET", f"/agents/{agent_id}/sessions/{thread}")          # the thread is the session
    assert [m["content"] for m in session["messages"] if m["role"] == "user"] == ["first", "second"]
    assert [r["status"] for r in await lg.runs.list(thread)] == ["success", "success"]


async def test_a_form_is_an_interrupt_resumed_by_a_command(server, alice):
    agent_id = alice.agent(FEEDBACK_DSL, title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    paused = await lg.runs.wait(thread, agent_id, input={"query": "coffee"})
    assert paused["__interrupt__"][0]["value"]["tips"] == TIPS
    state = await lg.threads.get_state(thread)
    assert state["next"] == ["UserFillUp.Ask"] and state["tasks"][0]["interrupts"][0]["value"]["tips"] == TIPS
    assert (await lg.threads.get(thread))["status"] == "interrupted"
    done = await lg.runs.wait(thread, agent_id, command={"resume": {"feedback": "bolder"}})
    assert done["answer"] == FINAL and done["outputs"]["LLM:Draft"]["content"] == DRAFT
    assert "__interrupt__" not in done


async def test_history_lists_every_step_and_runs_fork_from_earlier_checkpoints(server, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    await lg.runs.wait(thread, agent_id, input={"query": "first"})
    history = await lg.threads.get_history(thread)
    assert [h["next"] for h in reversed(history)] == [["__start__"], ["begin"], ["LLM.A"], ["Message.M"], []]
    before_message = next(h for h in history if h["next"] == ["Message.M"])
    replayed = await lg.runs.wait(thread, agent_id, input=None,
                                  checkpoint_id=before_message["checkpoint"]["checkpoint_id"])
    assert replayed["answer"] == chat_answer(1)
    edited = await lg.threads.update_state(thread, {"globals": {"sys.conversation_turns": 7}}, as_node="LLM.A",
                                           checkpoint_id=before_message["checkpoint"]["checkpoint_id"])
    forked = await lg.runs.wait(thread, agent_id, input=None, checkpoint_id=edited["checkpoint"]["checkpoint_id"])
    assert forked["answer"] == "Turn7:Answer 1 from LLM:A."
    ids = {h["checkpoint"]["checkpoint_id"] for h in await lg.threads.get_history(thread, limit=50)}
    assert {h["checkpoint"]["checkpoint_id"] for h in history} < ids


async def test_a_background_run_is_joined_and_a_long_one_cancelled(server, alice):
    chat, slow = alice.agent(CHAT_DSL, title()), alice.agent(long_dsl(), title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    run = await lg.runs.create(thread, chat, input={"query": "hi"})
    assert run["status"] in ("pending", "running")
    assert (await lg.runs.join(thread, run["run_id"]))["answer"] == chat_answer(1)
    assert (await lg.runs.get(thread, run["run_id"]))["status"] == "success"

    other = (await lg.threads.create())["thread_id"]
    long_run = await lg.runs.create(other, slow, input={"query": "go"}, stream_mode=["updates"])
    async for part in lg.runs.join_stream(other, long_run["run_id"]):
        if part.event == "updates":             # its first step is done: it runs
            break
    await lg.runs.cancel(other, long_run["run_id"], wait=True)
    assert (await lg.runs.get(other, long_run["run_id"]))["status"] == "interrupted"
    turns = alice.ok("GET", f"/agents/{slow}/sessions/{other}/trace")["turns"]
    assert turns[-1]["status"] == "cancelled" and len(turns[-1]["steps"]) < 10
    # a run cancelled before it started never runs
    queued = await lg.runs.create(other, slow, input={"query": "again"})
    await lg.runs.cancel(other, queued["run_id"], wait=True)
    assert (await lg.runs.get(other, queued["run_id"]))["status"] == "interrupted"


async def test_a_stateless_run_a_joined_stream_a_past_state_and_a_deleted_thread(server, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    lg = client(server, alice)
    stateless = [part async for part in lg.runs.stream(None, agent_id, input={"query": "hi"})]
    assert stateless[-1].event == "values" and stateless[-1].data["answer"] == chat_answer(1)   # a thread of its own

    thread = (await lg.threads.create())["thread_id"]
    run = await lg.runs.create(thread, agent_id, input={"query": "hi"}, stream_mode=["values", "messages-tuple"])
    joined: dict[str, list] = {}
    async for part in lg.runs.join_stream(thread, run["run_id"]):
        joined.setdefault(part.event, []).append(part.data)
    assert joined["values"][-1]["answer"] == chat_answer(1)
    assert "".join(chunk["content"] for chunk, _meta in joined["messages"]) == "Answer 1 from LLM:A."
    history = await lg.threads.get_history(thread)
    before_llm = next(h for h in history if h["next"] == ["LLM.A"])
    past = await lg.threads.get_state(thread, checkpoint={"checkpoint_id": before_llm["checkpoint"]["checkpoint_id"]})
    assert past["next"] == ["LLM.A"] and past["values"]["answer"] == ""
    assert await lg.threads.get_state(thread, checkpoint_id=before_llm["checkpoint"]["checkpoint_id"]) == past

    await lg.threads.delete(thread)
    with pytest.raises(NotFoundError):
        await lg.threads.get(thread)
    assert alice.call("GET", f"/agents/{agent_id}/sessions/{thread}")["code"] != 0     # the session went too


async def test_a_thread_continues_and_is_cancelled_from_another_server_process(server, alice, tmp_path):
    chat, slow = alice.agent(CHAT_DSL, title()), alice.agent(long_dsl(), title())
    here = client(server, alice)
    thread = (await here.threads.create())["thread_id"]
    await here.runs.wait(thread, chat, input={"query": "first"})
    with Server(server.db, tmp_path, PACED_SCRIPT) as second:
        there = client(second, alice)
        assert (await there.runs.wait(thread, chat, input={"query": "second"}))["answer"] == chat_answer(2)
        busy = (await here.threads.create())["thread_id"]
        run = await here.runs.create(busy, slow, input={"query": "go"})
        await there.runs.cancel(busy, run["run_id"])              # told through the database
        await asyncio.wait_for(there.runs.join(busy, run["run_id"]), 60)
        assert (await there.runs.get(busy, run["run_id"]))["status"] == "interrupted"


async def test_another_tenant_sees_neither_the_assistants_nor_the_threads(server, alice, bob):
    agent_id = alice.agent(CHAT_DSL, title())
    mine = client(server, alice)
    thread = (await mine.threads.create())["thread_id"]
    await mine.runs.wait(thread, agent_id, input={"query": "hi"})
    theirs = client(server, bob)
    assert agent_id not in {a["assistant_id"] for a in await theirs.assistants.search(limit=100)}
    with pytest.raises(NotFoundError):
        await theirs.threads.get(thread)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await theirs.runs.wait(thread, agent_id, input={"query": "mine now"})
    assert refused.value.response.status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await theirs.threads.create(thread_id=thread)
    assert refused.value.response.status_code == 409
    assert httpx.post(f"{server.url}/langgraph/threads", json={}).status_code == 401


async def test_requests_outside_the_served_subset_are_refused_saying_what_is_wrong(server, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    thread = (await client(server, alice).threads.create())["thread_id"]
    base, headers = f"{server.url}/langgraph", {"Authorization": f"Bearer {alice.token}"}

    def refused(path: str, body: dict) -> str:
        reply = httpx.post(base + path, json=body, headers=headers, timeout=60)
        assert reply.status_code == 422, reply.text
        return reply.json()["detail"]

    assert "`limit`" in refused("/threads/search", {"limit": "ten"})
    assert "`checkpoint`" in refused(f"/threads/{thread}/runs/wait", {"assistant_id": agent_id, "checkpoint": "x"})
    assert "messages-tuple" in refused(f"/threads/{thread}/runs/stream", {"assistant_id": agent_id,
                                                                          "stream_mode": "tools", "input": {}})
    assert "goto" in refused(f"/threads/{thread}/runs/wait", {"assistant_id": agent_id, "command": {"goto": "x"}})
    assert "`input`" in refused(f"/threads/{thread}/runs/wait", {"assistant_id": agent_id, "input": "hello"})
