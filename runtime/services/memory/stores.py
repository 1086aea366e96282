"""The memory store a server or the command line opens by default: LangGraph's own store classes.

- a SQLite sessions database (the embedded default): `AsyncSqliteStore` in `memory.db` beside it (a file of its
  own, so that memory saves never wait on the sessions' writes);
- PostgreSQL: `AsyncPostgresStore` in the sessions' database, on the server's connection pool when it gives one.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, AsyncIterator

MEMORY_FILE = "memory.db"


def is_postgres(db: str | None) -> bool:
    return bool(db) and str(db).startswith(("postgresql://", "postgres://"))


def memory_path(db: str | None) -> str:
    """The SQLite memory file for a sessions database (a path or sqlite:///path; ~/.canvas2graph without one)."""
    if db and not is_postgres(db):
        path = db[len("sqlite:///"):] if db.startswith("sqlite:///") else db
        if path not in ("", ":memory:"):
            return str(Path(path).expanduser().resolve().parent / MEMORY_FILE)
    return str(Path.home() / ".canvas2graph" / MEMORY_FILE)


@contextlib.asynccontextmanager
async def open_memory_store(db: str | None, *, pool: Any = None) -> AsyncIterator[Any]:
    """LangGraph's store for the sessions database `db`, set up (its tables made) and closed after the block."""
    if is_postgres(db):
        from langgraph.store.postgres.aio import AsyncPostgresStore
        if pool is not None:
            store = AsyncPostgresStore(conn=pool)
            await store.setup()
            yield store
            return
        async with AsyncPostgresStore.from_conn_string(db) as store:
            await store.setup()
            yield store
        return
    from langgraph.store.sqlite.aio import AsyncSqliteStore
    path = memory_path(db)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    async with AsyncSqliteStore.from_conn_string(path) as store:
        # WAL: a save commits without syncing the file twice, and readers do not wait for writers
        await store.conn.execute("PRAGMA journal_mode=WAL")
        await store.conn.execute("PRAGMA synchronous=NORMAL")
        await store.setup()
        yield store
