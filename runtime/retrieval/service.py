"""Which canvases retrieve, and the `canvas2graph index` command.

A run's backend is opened by `runtime.environment.RunEnvironment` for canvases that retrieve (a
Retrieval component, or an Agent with the Retrieval tool); other canvases get none.
"""
from __future__ import annotations

import sys
from typing import Any

from runtime.retrieval.config import default_url


def uses_retrieval(components: dict) -> bool:
    """True when a component is a Retrieval or an Agent lists one among its tools (at any depth)."""
    def walk(value: Any) -> bool:
        if isinstance(value, dict):
            if value.get("component_name") == "Retrieval":
                return True
            return any(walk(v) for v in value.values())
        if isinstance(value, list):
            return any(walk(v) for v in value)
        return False
    return any(e.component_name == "Retrieval" or walk(e.params.get("tools")) for e in components.values())


def cmd_index(args) -> int:
    """canvas2graph index PATH... --kb NAME [--retrieval URL] [--embd-id ID]"""
    import asyncio
    from runtime.retrieval import RetrievalError, open_backend
    from runtime.retrieval.embedded import EmbeddedBackend
    from runtime.retrieval.indexing import IndexError_, index_files

    backend = open_backend(args.retrieval or None, session_db=args.db)
    try:
        if not isinstance(backend, EmbeddedBackend):
            print(f"canvas2graph: index writes to the embedded store only (sqlite:///path); {backend.describe()} "
                  "is filled by RAGFlow itself", file=sys.stderr)
            return 2
        report = asyncio.run(index_files(backend, args.paths, args.kb, embd_id=args.embd_id,
                                         progress=not args.quiet))
    except (RetrievalError, IndexError_) as e:
        print(f"canvas2graph: {e}", file=sys.stderr)
        return 1
    finally:
        asyncio.run(backend.aclose())
    print(f"{args.kb}: {report.indexed} file(s) indexed ({report.chunks} chunks), {report.unchanged} unchanged, "
          f"in {backend.describe()}" + ("" if args.embd_id else " (text only: --embd-id MODEL@FACTORY adds vectors)"))
    return 0


__all__ = ["cmd_index", "uses_retrieval", "default_url"]
