"""Session lifecycle (runtime/run/lifecycle.py, `canvas2graph sessions`): list, show, delete, prune, expire.

Sessions are made by real turns (a scripted model) on a SQLite file and on PostgreSQL. On PostgreSQL,
which other test runs may share, only deletion by id and the dry run of `prune` are exercised: a real
prune there would delete other runs' sessions.
"""
from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from canvas2graph.runtime.run import lifecycle
from canvas2graph.runtime.run.checkpoint import is_postgres
from canvas2graph.server.backend.store import open_store
from tests.runtime.checkpointers import new_session
from tests.runtime.run.test_durable_sessions import CHAT_DSL, run_turn
from tests import forkserver

REPO = Path(__file__).resolve().parents[3]


def sessions_cli(db: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "sessions", *args, "--db", db], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


async def chat(db: str, *sessions: str, turns: int = 2) -> None:
    """`turns` finished turns on each session, through the store's own checkpointer."""
    async with open_store(db) as store:
        for session in sessions:
            for n in range(turns):
                events = await run_turn(store.checkpointer, CHAT_DSL, session, [f"Answer {n}."], query=f"q{n}")
                assert events[-1]["event"] == "workflow_finished"


async def stored(db: str, session: str) -> dict[str, int]:
    """How many rows of each table a session has."""
    tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes") if is_postgres(db) else ("checkpoints", "writes")
    async with open_store(db) as store:
        return {t: (await store.db.fetchall(f"SELECT COUNT(*) AS n FROM {t} WHERE thread_id = ?", (session,)))[0]["n"]
                for t in tables}


@pytest.fixture
def db(durable_url, tmp_path) -> str:
    return durable_url


async def test_sessions_are_listed_shown_and_deleted_with_everything_they_store(db):
    keep, drop = new_session(), new_session()
    await chat(db, keep, drop)
    assert all(n > 0 for n in (await stored(db, drop)).values())

    listed = sessions_cli(db, "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    mine = {s["id"]: s for s in json.loads(listed.stdout) if s["id"] in (keep, drop)}
    assert set(mine) == {keep, drop} and all(s["steps"] > 0 for s in mine.values())

    shown = sessions_cli(db, "show", drop)
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    assert info["turns"] == 2 and info["open_turn"] is False and info["pending_writes"] > 0

    deleted = sessions_cli(db, "delete", drop)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "deleted 1 session"
    assert set((await stored(db, drop)).values()) == {0}
    assert all(n > 0 for n in (await stored(db, keep)).values())        # the other session is untouched
    await chat(db, keep, turns=1)                                      # and goes on

    again = sessions_cli(db, "delete", drop)
    assert again.returncode == 2 and again.stderr.strip() == f"canvas2graph: no session {drop} in this database; nothing deleted"


async def test_prune_dry_run_lists_the_idle_sessions_and_deletes_nothing(db):
    session = new_session()
    await chat(db, session, turns=1)
    dry = sessions_cli(db, "prune", "--older-than", "0s", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert session in dry.stdout and "would delete" in dry.stdout.splitlines()[-1]
    assert (await stored(db, session))["checkpoints"] > 0
    none = sessions_cli(db, "prune", "--older-than", "3000d", "--dry-run")
    assert none.stdout.strip() == "would delete 0 sessions idle for 3000d or more"       # says so, not nothing
    listed = sessions_cli(db, "list").stdout            # a session of `run` has no agent: none is named
    assert "agent None" not in listed and listed.strip().splitlines()[-1].split()[1] in ("session", "sessions")
    bad = sessions_cli(db, "prune", "--older-than", "ten days")
    assert bad.returncode == 2 and "'ten days' is not a duration" in bad.stderr


async def test_prune_deletes_the_sessions_idle_longer_than_the_duration_and_keeps_the_others(tmp_path):
    db = str(tmp_path / "sessions.db")
    old, new = new_session(), new_session()
    await chat(db, old, turns=1)
    async with open_store(db) as store:
        old_time = next(s.last_active for s in await lifecycle.list_sessions(store) if s.id == old)
    while time.time() <= old_time + 0.01:          # the second session is later than the first, however fast
        await asyncio.sleep(0.01)
    await chat(db, new, turns=1)
    async with open_store(db) as store:
        new_time = next(s.last_active for s in await lifecycle.list_sessions(store) if s.id == new)
        assert new_time > old_time
        # "now" an hour after a moment between the two: only the first has been idle for an hour
        pruned = await lifecycle.prune(store, 3600, now=(old_time + new_time) / 2 + 3600)
    assert pruned == [old]
    assert set((await stored(db, old)).values()) == {0} and (await stored(db, new))["checkpoints"] > 0

    nothing = sessions_cli(db, "prune", "--older-than", "30d")
    assert nothing.returncode == 0 and nothing.stdout.startswith("deleted 0 sessions idle for 30d or more")
    everything = sessions_cli(db, "prune", "--older-than", "0")
    assert everything.returncode == 0 and everything.stdout.startswith("deleted 1 session idle for 0 or more")
    assert set((await stored(db, new)).values()) == {0}


async def test_a_new_sqlite_file_gives_the_space_of_deleted_sessions_back(tmp_path):
    db = str(tmp_path / "sessions.db")
    async with open_store(db):
        pass
    empty = os.path.getsize(db)                 # the tables' and indexes' own pages
    sessions = [new_session() for _ in range(5)]
    await chat(db, *sessions, turns=3)
    size = os.path.getsize(db)
    async with open_store(db) as store:
        await lifecycle.delete_sessions(store, sessions)
        assert await lifecycle.give_space_back(store) == 0          # no free page left in the file
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2       # INCREMENTAL
    assert os.path.getsize(db) - empty < (size - empty) / 2


async def test_an_old_sqlite_file_gets_its_space_back_with_vacuum(tmp_path):
    db = str(tmp_path / "old.db")
    import shutil
    shutil.copy(REPO / "tests" / "fixtures" / "sessions_v0" / "sessions.db", db)       # made without auto_vacuum
    done = sessions_cli(db, "delete", "paused", "finished", "--vacuum")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0] == 0


def test_durations_read_as_people_write_them():
    assert [lifecycle.parse_duration(t) for t in ("45", "90s", "30m", "12h", "7d", "2w", "1.5h")] == [
        45, 90, 1800, 43200, 604800, 1209600, 5400]
    with pytest.raises(lifecycle.LifecycleError, match="'soon' is not a duration"):
        lifecycle.parse_duration("soon")


def test_the_last_activity_of_a_session_is_the_time_its_newest_checkpoint_id_carries():
    from langgraph.checkpoint.base.id import uuid6
    before = time.time()
    made = lifecycle.checkpoint_time(str(uuid6()))
    assert before - 0.001 <= made <= time.time() + 0.001
    assert lifecycle.checkpoint_time("not-a-uuid") == 0.0
