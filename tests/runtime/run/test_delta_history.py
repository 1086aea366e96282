"""The conversation's history and globals are written as appends (runtime/graph/state.py): a turn stores what it
adds, the whole value is stored only at LangGraph's `DeltaChannel` snapshots, and every checkpointer
rebuilds the same state, so LangGraph's get_state / update_state / history keep working."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.graph import state as state_module
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.graph.state import (appended, combine_updates, merge_globals, reduce_globals, reduce_history,
                           with_update)
from tests.runtime.checkpointers import new_session
from tests.runtime.run.test_durable_sessions import CHAT_DSL, run_turn


def test_appends_add_to_the_list_and_a_plain_list_replaces_it():
    history = reduce_history([], [appended([["user", "a"]]), appended([["assistant", "x"]])])
    assert history == [["user", "a"], ["assistant", "x"]]
    # the finish node replacing its own answer in the same turn: one entry dropped, one added
    assert reduce_history(history, [appended([["assistant", "y"]], 1)]) == [["user", "a"], ["assistant", "y"]]
    assert reduce_history(history, [[["user", "only"]]]) == [["user", "only"]]      # update_state with a list
    # applying two batches one after the other is applying them at once (DeltaChannel's contract)
    writes = [appended([1, 2]), appended([3], 1), [7], appended([8]), appended([9], 2)]
    for cut in range(len(writes) + 1):
        assert reduce_history(reduce_history([0], writes[:cut]), writes[cut:]) == reduce_history([0], writes)


def test_globals_merge_by_key_and_append_to_sys_history():
    value = {"sys.query": "a", "sys.history": ["user: a"]}
    merged = reduce_globals(value, [{"sys.query": "b", "sys.history": appended(["user: b"])},
                                   {"sys.history": appended(["assistant: x"])}])
    assert merged == {"sys.query": "b", "sys.history": ["user: a", "user: b", "assistant: x"]}
    assert value == {"sys.query": "a", "sys.history": ["user: a"]}        # the value read is not changed
    # two updates combined (a fused step) append both, in order
    both = merge_globals({"sys.history": appended(["u"])}, {"sys.history": appended(["v"])})
    assert reduce_globals({"sys.history": ["t"]}, [both])["sys.history"] == ["t", "u", "v"]


def test_views_and_combined_updates_see_the_whole_history():
    state = {"history": [["user", "a"]], "globals": {"sys.history": ["user: a"], "x": 1}}
    first = {"history": appended([["assistant", "b"]]), "globals": {"sys.history": appended(["assistant: b"])}}
    then = {"history": appended([["assistant", "c"]], 1), "globals": {"y": 2}}
    view = with_update(state, combine_updates(first, then))
    assert view["history"] == [["user", "a"], ["assistant", "c"]]
    assert view["globals"] == {"sys.history": ["user: a", "assistant: b"], "x": 1, "y": 2}


@pytest.mark.parametrize("snapshot_every", [3, 200])
async def test_a_conversation_rebuilds_the_same_history_on_every_store(checkpointer_url, snapshot_every, monkeypatch):
    """With snapshots every 3 updates the value is rebuilt from a snapshot, with 200 from the writes alone."""
    monkeypatch.setattr(state_module, "SNAPSHOT_EVERY", snapshot_every)
    session, turns = new_session(), 7
    async with open_checkpointer(checkpointer_url) as saver:
        for n in range(turns):
            await run_turn(saver, CHAT_DSL, session, [f"Answer {n}."], query=f"question {n}")
        graph = compile_dsl(CHAT_DSL).graph(saver)
        config = {"configurable": {"thread_id": session}}
        values = (await graph.aget_state(config)).values
        assert [c for r, c in values["history"] if r == "user"] == [f"question {n}" for n in range(turns)]
        assert ["".join(c["content"].split()) for r, c in values["history"] if r == "assistant"] == [
            f"Turn{n + 1}:Answer{n}." for n in range(turns)]          # (the Message's spaces aside)
        assert len(values["globals"]["sys.history"]) == 2 * turns
        assert values["globals"]["sys.conversation_turns"] == turns
        # every earlier checkpoint rebuilds its own history: time travel sees the conversation as it was
        ends = [s for s in [s async for s in graph.aget_state_history(config)] if not s.next]
        assert sorted(len(s.values["history"]) for s in ends) == [2 * n for n in range(1, turns + 1)]
        # update_state with a whole list replaces the history; the next turn appends to it
        await graph.aupdate_state(config, {"history": [["user", "kept"], ["assistant", {"content": "ok"}]]},
                                  as_node="__canvas_finish__")
        await run_turn(saver, CHAT_DSL, session, ["Last."], query="after")
        values = (await graph.aget_state(config)).values
        assert [c for r, c in values["history"] if r == "user"] == ["kept", "after"]


async def test_sqlite_finds_snapshots_in_its_blob_table(tmp_path, monkeypatch):
    """The walk back stops at the nearest snapshot instead of reading the thread back to its first step."""
    monkeypatch.setattr(state_module, "SNAPSHOT_EVERY", 4)
    db, session = str(tmp_path / "s.db"), new_session()
    async with open_checkpointer(db) as saver:
        for n in range(12):
            await run_turn(saver, CHAT_DSL, session, [f"Answer {n}."], query=f"q{n}")
        config = {"configurable": {"thread_id": session}}
        found = saver.get_delta_channel_history(config=config, channels=["history", "globals"])
        steps = len(list(saver.list(config)))
        assert "seed" in found["history"] and len(found["history"]["writes"]) <= 4
        assert "seed" in found["globals"]
        assert len(found["history"]["writes"]) < steps
