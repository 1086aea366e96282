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
from canvas2graph.runtime.services.memory.book import MemoryBook, MemoryRefused, MemoryNotFound
from canvas2graph.runtime.services.memory.records import Memory, MemoryMessage, memory_types, type_names

__all__ = ["MemoryBook", "MemoryRefused", "MemoryNotFound", "Memory", "MemoryMessage", "memory_types", "type_names"]
