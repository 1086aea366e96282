"""Retention (runtime/run/retention.py): every step of the last turns, only the trace of older ones, on SQLite and
PostgreSQL. The conversation goes on as if nothing was compacted; the trace lists every turn; a fork from a
compacted step is refused saying so; deleting the session deletes the stored traces too."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.run.retention import compacted_turns, keep_turns
from canvas2graph.runtime.run.steps import ForkError, atrace, fork_plan
from tests.runtime.checkpointers import new_session
from tests.runtime.run.test_durable_sessions import CHAT_DSL, run_turn


async def test_older_turns_keep_their_trace_and_the_last_ones_every_step(durable_url, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_KEEP_TURNS", "2")        # compact down to 2 turns once 4 are kept
    session, turns = new_session(), 7
    async with open_checkpointer(durable_url) as saver:
        for n in range(turns):
            await run_turn(saver, CHAT_DSL, session, [f"Answer {n}."], query=f"question {n}")
        graph = compile_dsl(CHAT_DSL).graph(saver)
        config = {"configurable": {"thread_id": session}}

        stored = await compacted_turns(saver, session)
        assert [t["query"] for t in stored] == [f"question {n}" for n in range(4)]   # after turns 4 and 6
        steps = [s async for s in graph.aget_state_history(config)]
        assert len({(s.metadata or {}).get("message_id") for s in steps if (s.metadata or {}).get("message_id")}) <= 4

        # the conversation itself is whole: history and globals rebuilt from the snapshot at the new first step
        values = (await graph.aget_state(config)).values
        assert [c for r, c in values["history"] if r == "user"] == [f"question {n}" for n in range(turns)]
        assert values["globals"]["sys.conversation_turns"] == turns
        assert len(values["globals"]["sys.history"]) == 2 * turns

        # the trace lists every turn, compacted ones first, with what they showed
        trace = await atrace(graph, config)
        assert [t["turn"] for t in trace] == list(range(1, turns + 1))
        assert [t["query"] for t in trace] == [f"question {n}" for n in range(turns)]
        assert [bool(t.get("compacted")) for t in trace] == [True] * 4 + [False] * 3
        assert all(t["status"] == "finished" for t in trace)
        llm = next(s for s in trace[0]["steps"] if s["component_id"] == "LLM:A")
        assert llm["outputs"]["content"] == "Answer 0." and llm["messages"]

        # a fork from a kept step works; one from a compacted step says why it cannot
        kept = next(s for s in trace[-1]["steps"] if s["component_id"] == "LLM:A")
        plan = await fork_plan(graph, config, kept["checkpoint_id"], outputs={"content": "edited"})
        assert plan.component_id == "LLM:A"
        with pytest.raises(ForkError, match="compacted") as refused:
            await fork_plan(graph, config, llm["checkpoint_id"], outputs={"content": "edited"})
        assert refused.value.field == "checkpoint_id"

        # and the next turn carries on from the compacted conversation
        await run_turn(saver, CHAT_DSL, session, ["Later."], query="one more")
        values = (await graph.aget_state(config)).values
        assert [c for r, c in values["history"] if r == "user"][-2:] == [f"question {turns - 1}", "one more"]


async def test_deleting_a_session_deletes_its_compacted_turns(tmp_path, monkeypatch):
    from canvas2graph.runtime.run.lifecycle import delete_sessions
    from canvas2graph.server.backend.store import open_store
    monkeypatch.setenv("CANVAS2GRAPH_KEEP_TURNS", "1")
    db, session = str(tmp_path / "s.db"), new_session()
    async with open_checkpointer(db) as saver:
        for n in range(3):
            await run_turn(saver, CHAT_DSL, session, [f"Answer {n}."], query=f"q{n}")
        assert await compacted_turns(saver, session)
    async with open_store(db) as store:
        await delete_sessions(store, [session])
        assert await compacted_turns(store.checkpointer, session) == []


async def test_langgraphs_own_delete_thread_deletes_the_compacted_turns_too(durable_url, monkeypatch):
    """A LangGraph user deletes a thread with the checkpointer's own call, not canvas2graph's: nothing of the
    session may stay behind, on either store."""
    monkeypatch.setenv("CANVAS2GRAPH_KEEP_TURNS", "1")
    session = new_session()
    async with open_checkpointer(durable_url) as saver:
        for n in range(3):
            await run_turn(saver, CHAT_DSL, session, [f"Answer {n}."], query=f"q{n}")
        assert await compacted_turns(saver, session)
        await saver.adelete_thread(session)
        assert await compacted_turns(saver, session) == []
        assert await saver.aget_tuple({"configurable": {"thread_id": session}}) is None


def test_the_number_of_turns_kept_is_checked(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_KEEP_TURNS", "ten")
    with pytest.raises(ValueError, match="CANVAS2GRAPH_KEEP_TURNS"):
        keep_turns()
    monkeypatch.setenv("CANVAS2GRAPH_KEEP_TURNS", "0")
    assert keep_turns() == 0
