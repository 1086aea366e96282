"""SQLite checkpoints store a channel's value only when it changes (runtime/run/sqlite_blobs.py), compressed
from 512 bytes, and read the files earlier versions wrote (whole values inline in each checkpoint row, or a
marker row for each channel without a value)."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.run.sqlite_blobs import COMPRESS_FROM, CompressingSerializer
from tests.runtime.checkpointers import new_session
from tests.runtime.run.test_durable_sessions import CHAT_DSL, run_turn

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sessions_v0"


def rows(db: str, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


async def test_a_channel_is_stored_once_per_version_not_once_per_step(tmp_path):
    db, session = str(tmp_path / "s.db"), new_session()
    async with open_checkpointer(db) as saver:
        for n in range(3):
            await run_turn(saver, CHAT_DSL, session, [f"Answer {n}."], query=f"question {n}")
        state = await compile_dsl(CHAT_DSL).graph(saver).aget_state({"configurable": {"thread_id": session}})
    assert [c for r, c in state.values["history"] if r == "user"] == ["question 0", "question 1", "question 2"]
    steps = rows(db, "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", session)[0][0]
    def stored(channel: str) -> int:
        return rows(db, "SELECT COUNT(*) FROM checkpoint_blobs WHERE thread_id = ? AND channel = ?", session, channel)[0][0]
    # the request changes at the start and the end of each turn: the steps between store no row for it
    assert stored("request") == 6 and steps > 12
    # the history is stored as its writes (a DeltaChannel): no row at all until its first snapshot
    assert stored("history") == 0
    assert rows(db, "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ? AND length(checkpoint) > 2048", session) == [(0,)]


def test_large_values_are_stored_compressed_and_read_back():
    serde = CompressingSerializer()
    small, large = {"text": "short"}, {"text": "a conversation " * 1000}
    assert not serde.dumps_typed(small)[0].endswith("+zlib")
    type_, data = serde.dumps_typed(large)
    assert type_.endswith("+zlib") and len(data) < COMPRESS_FROM
    assert serde.loads_typed((type_, data)) == large
    assert serde.loads_typed(serde.dumps_typed(small)) == small


async def test_a_fork_from_a_checkpoint_an_earlier_version_wrote_finds_its_values(tmp_path):
    db = str(shutil.copy(FIXTURE / "sessions.db", tmp_path / "sessions.db"))
    dsl = json.loads((FIXTURE / "chat.json").read_text())
    config = {"configurable": {"thread_id": "finished"}}
    async with open_checkpointer(db) as saver:
        await run_turn(saver, dsl, "finished", ["Fourth answer."], query="four")        # the new layout from here
        graph = compile_dsl(dsl).graph(saver)
        history = [s async for s in graph.aget_state_history(config)]
        # the last checkpoint of turn 2, written by the earlier version with its values inline
        old = next(s for s in history if s.values.get("globals", {}).get("sys.conversation_turns") == 2 and not s.next)
        forked = await graph.aupdate_state(old.config, {"request": {**old.values["request"], "note": "fork"}})
        state = await graph.aget_state(forked)
    assert [c for r, c in state.values["history"] if r == "user"] == ["one", "two"]
    assert state.values["globals"]["sys.conversation_turns"] == 2
    assert state.values["request"]["note"] == "fork"
    # a new process reads the fork the same: the values it kept from the old row (the fork changed only the
    # request) are stored with it, or rebuilt from the old row's inline ones
    async with open_checkpointer(db) as saver:
        again = await compile_dsl(dsl).graph(saver).aget_state(forked)
    assert again.values["history"] == state.values["history"]
    assert again.values["globals"] == state.values["globals"] and again.values["request"] == state.values["request"]
    assert again.values["outputs"] == state.values["outputs"]
