"""Every memory test runs over each of LangGraph's stores: in memory, SQLite (the embedded default) and PostgreSQL."""
from __future__ import annotations

import uuid

import pytest
from langgraph.store.memory import InMemoryStore

from canvas2graph.runtime.services.memory import MemoryBook
from canvas2graph.runtime.services.memory.stores import open_memory_store
from tests.runtime.checkpointers import postgres_url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request, tmp_path):
    if request.param == "memory":
        yield InMemoryStore()
        return
    db = str(tmp_path / "sessions.db") if request.param == "sqlite" else postgres_url()
    async with open_memory_store(db) as opened:
        yield opened


@pytest.fixture
def book(store) -> MemoryBook:
    """A tenant of its own: tests on one PostgreSQL database never see each other's memories."""
    return MemoryBook(store, f"tenant-{uuid.uuid4().hex[:8]}")
