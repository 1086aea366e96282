"""`canvas2graph index PATH... --kb NAME`: local files chunked into the embedded retrieval store."""
from __future__ import annotations

import sys


def cmd_index(args) -> int:
    """canvas2graph index PATH... --kb NAME [--retrieval URL] [--embd-id ID]"""
    import asyncio
    from canvas2graph.runtime.services.retrieval import RetrievalError, open_backend
    from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
    from canvas2graph.runtime.services.retrieval.indexing import IndexError_, index_files

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
