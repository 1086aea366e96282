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
        from canvas2graph.runtime.run.postgres_saver import CanvasPostgresSaver
        async with CanvasPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver
        return
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else url
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    from canvas2graph.runtime.run.sqlite_saver import InlineSqliteSaver
    with InlineSqliteSaver.open(path) as saver:
        yield saver
