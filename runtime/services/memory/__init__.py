"""RAGFlow's memories on LangGraph's Store: what agents remember across sessions (issue 35).

A tenant's memories and their messages are items of a LangGraph `BaseStore` (`SqliteStore`, `PostgresStore`,
`InMemoryStore` or a store a LangGraph user gives `compile(store=...)`), so LangGraph's `/store` API and any
store tool see them:

| namespace                              | key            | value                                         |
|----------------------------------------|----------------|-----------------------------------------------|
| (tenant, "memories")                   | memory id      | the memory's settings (`records.Memory`)      |
| (tenant, "memory", memory id)          | message id     | one message (`records.MemoryMessage`)         |
| (tenant, "memory_usage")               | memory id      | {"bytes": n}: what its messages weigh         |
| ("c2g_memory_pending",)                | memory-message | an exchange whose typed memories are not yet extracted |

`records.py` holds the shapes and RAGFlow's rules, `book.py` the operations (`MemoryBook`), `ranking.py` how a
search scores messages, `extraction.py` the typed extraction by the memory's chat model (run after the turn, off
its critical path, from the pending items, so a crash loses none), `stores.py` the default stores.
"""
from typing import Any

MEMORY_SERVICE = "memory"               # a run's `ctx.services` key: the LangGraph store its memories are in
EMBEDDER_SERVICE = "memory_embedder"    # ... embd_id -> an embedder (optional: without one, ranking by text)

from canvas2graph.runtime.services.memory.book import MemoryBook, MemoryRefused, MemoryNotFound
from canvas2graph.runtime.services.memory.records import Memory, MemoryMessage, memory_types, type_names

__all__ = ["MemoryBook", "MemoryRefused", "MemoryNotFound", "Memory", "MemoryMessage", "memory_types", "type_names",
           "memory_ids_of", "saves_memory", "MEMORY_SERVICE", "EMBEDDER_SERVICE"]


def memory_ids_of(components: dict) -> list[tuple[str, str, str, str]]:
    """(component id, field, memory id, kind) of every memory a DSL's or plan's components name, the kind being
    "Message" (it saves there) or "Retrieval" (it reads there; an Agent's Retrieval tool is its Agent's)."""
    found: list[tuple[str, str, str, str]] = []

    def walk(component_id: str, name: Any, params: Any) -> None:
        if not isinstance(params, dict):
            return
        if name in ("Message", "Retrieval"):
            ids = params.get("memory_ids") or []
            for memory_id in [ids] if isinstance(ids, str) else ids if isinstance(ids, list) else []:
                if memory_id:
                    found.append((component_id, "params.memory_ids", str(memory_id), name))
        for tool in params.get("tools") or [] if isinstance(params.get("tools"), list) else []:
            if isinstance(tool, dict):
                walk(component_id, tool.get("component_name"), tool.get("params"))

    for component_id, entry in components.items():
        name = getattr(entry, "component_name", None)
        params = getattr(entry, "params", None)
        if name is None and isinstance(entry, dict):        # a raw DSL's entry
            obj = entry.get("obj") or {}
            name, params = obj.get("component_name"), obj.get("params")
        walk(str(component_id), name, params)
    return found


def saves_memory(components: dict) -> bool:
    """True when a Message of these components saves to memories."""
    return any(kind == "Message" for *_, kind in memory_ids_of(components))
