"""Retrieval backends for RAGFlow's Retrieval component: Elasticsearch indexes RAGFlow built, or the
embedded SQLite store. `open_backend(url)` picks one; see `config.py` for URLs and settings."""
from __future__ import annotations

from canvas2graph.runtime.services.retrieval.config import RetrievalConfig, default_url, parse_backend_url
from canvas2graph.runtime.services.retrieval.protocol import (DEFAULT_TIMEOUT_S, RetrievalBackend, RetrievalError, RetrievalRequest,
                                        RetrievalResult)


def open_backend(url: str | None = None, cfg: RetrievalConfig | None = None, *, session_db: str | None = None):
    """The backend a URL names; without one, the embedded store beside the session database."""
    import os
    from canvas2graph.runtime.services.retrieval.config import URL_ENV
    cfg = cfg or RetrievalConfig.load()
    parsed = parse_backend_url(url or os.environ.get(URL_ENV) or default_url(session_db))
    if parsed.kind == "sqlite":
        from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
        return EmbeddedBackend(parsed.path, cfg)
    from canvas2graph.runtime.services.retrieval.elasticsearch import ElasticsearchBackend
    return ElasticsearchBackend(parsed, cfg)


__all__ = ["open_backend", "RetrievalBackend", "RetrievalConfig", "RetrievalError", "RetrievalRequest",
           "RetrievalResult", "DEFAULT_TIMEOUT_S"]
