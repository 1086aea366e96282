"""How a component reaches the tenant's memories (issue 35): the store LangGraph's runtime gives the graph (a
LangGraph user's `compile(store=...)`), else the run's `memory` service (`canvas2graph serve` and `run` open
LangGraph's SQLite or PostgreSQL store beside the sessions); the tenant scopes it (`tenant` service)."""
from __future__ import annotations

import hashlib
from typing import Any

from canvas2graph.nodes.base import ComponentError
from canvas2graph.runtime.services.memory import EMBEDDER_SERVICE, MEMORY_SERVICE


def memory_store(ctx: Any) -> Any:
    from langgraph.config import get_store
    try:
        store = get_store()
    except RuntimeError:                # called outside a graph run (a component's debug run)
        store = None
    if store is None and ctx is not None:
        store = ctx.extras.get(MEMORY_SERVICE)
    return store


def book_for(ctx: Any, component_id: str, field: str):
    """The run's tenant's MemoryBook; a ComponentError naming the field when the run has no memory store."""
    from canvas2graph.runtime.services.memory import MemoryBook
    store = memory_store(ctx)
    if store is None:
        raise ComponentError(component_id, f"{field}: this run has no memory store (compile the graph with "
                                           "store=..., or run it with canvas2graph serve or run)")
    extras = ctx.extras if ctx is not None else {}
    return MemoryBook(store, str(extras.get("tenant") or ""), embedder=extras.get(EMBEDDER_SERVICE))


def exchange_key(*parts: Any) -> str:
    """A stable key for one save of one exchange: the same step run again (a takeover) saves over it."""
    return hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()


def thread_id() -> str:
    from langgraph.config import get_config
    try:
        return str((get_config().get("configurable") or {}).get("thread_id") or "")
    except RuntimeError:
        return ""
