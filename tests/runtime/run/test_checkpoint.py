"""Checkpointers opened from a path or URL: SQLite files run in WAL mode without an fsync per commit."""
from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from canvas2graph.runtime.run.checkpoint import open_checkpointer


async def pragma(saver, name: str):
    return saver.conn.execute(f"PRAGMA {name}").fetchone()[0]


async def test_no_url_means_an_in_memory_checkpointer():
    async with open_checkpointer(None) as saver:
        assert isinstance(saver, InMemorySaver)


async def test_a_sqlite_session_file_uses_wal_and_synchronous_normal(tmp_path, monkeypatch):
    monkeypatch.delenv("CANVAS2GRAPH_SQLITE_SYNC", raising=False)
    async with open_checkpointer(str(tmp_path / "deep" / "sessions.db")) as saver:
        assert await pragma(saver, "journal_mode") == "wal"
        assert await pragma(saver, "synchronous") == 1          # NORMAL
    assert (tmp_path / "deep" / "sessions.db").exists()


async def test_canvas2graph_sqlite_sync_full_keeps_an_fsync_per_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_SQLITE_SYNC", "full")
    async with open_checkpointer(f"sqlite:///{tmp_path / 'sessions.db'}") as saver:
        assert await pragma(saver, "synchronous") == 2          # FULL


async def test_an_unknown_sqlite_sync_value_falls_back_to_normal(tmp_path, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_SQLITE_SYNC", "off")       # OFF could corrupt the file: not offered
    async with open_checkpointer(str(tmp_path / "sessions.db")) as saver:
        assert await pragma(saver, "synchronous") == 1
