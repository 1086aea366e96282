"""What a compiled graph runs on, in three layers (docs/architecture.md):

- `graph/`: the graph kernel the builder and the nodes share: state channels, values, the start and end
  of a turn, model-call bookkeeping, the order of a batch's events;
- `services/`: what nodes reach: models, scripts, the sandbox, retrieval, MCP, files, the host guard,
  observability (LangSmith, Langfuse);
- `run/`: the runner above the compiler: turns, RAGFlow's events, step history and forks,
  checkpointers, session lifecycle, ingestion runs.

This `__init__` imports nothing: each layer is imported by what uses it.
"""
