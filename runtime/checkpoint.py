"""Checkpointers from a URL or path: SQLite (default) or PostgreSQL (several servers)."""
from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import AsyncIterator

from langgraph.checkpoint.base import BaseCheckpointSaver


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


@asynccontextmanager
async def open_checkpointer(url: str | None) -> AsyncIterator[BaseCheckpointSaver]:
    """`None` or ":memory:" -> in-memory; a path or sqlite:///path -> SQLite; postgresql:// -> PostgreSQL."""
    if not url or url == ":memory:":
        from langgraph.checkpoint.memory import InMemorySaver
        yield InMemorySaver()
        return
    if is_postgres(url):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver
        return
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else url
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()             # creates the tables and turns on WAL, before the pragma below
        await saver.conn.execute(f"PRAGMA synchronous={sqlite_synchronous()}")
        yield saver


def sqlite_synchronous() -> str:
    """SQLite's `synchronous` setting for session files: NORMAL unless CANVAS2GRAPH_SQLITE_SYNC says
    FULL or EXTRA.

    The saver commits at every step. With WAL, NORMAL skips the fsync of each commit (about 0.5 ms
    per step): a process crash loses nothing, an OS crash or power loss may lose the last commits
    but never corrupts the file. FULL also survives those, at that cost.
    """
    value = os.environ.get("CANVAS2GRAPH_SQLITE_SYNC", "").strip().upper()
    return value if value in ("NORMAL", "FULL", "EXTRA") else "NORMAL"
