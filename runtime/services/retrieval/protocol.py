"""What every retrieval backend offers the Retrieval component, and what it returns.

A backend answers `retrieve(RetrievalRequest)` with RAGFlow's `Dealer.retrieval` result: the page of
chunk dicts, the total that passed the threshold and doc_aggs. Backends differ only in how they fetch
the candidate window; the re-scoring after that is `canvas2graph.runtime.services.retrieval.scoring`, shared by all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

DEFAULT_TIMEOUT_S = 12.0     # RAGFlow's COMPONENT_EXEC_TIMEOUT around the Retrieval tool


class RetrievalError(Exception):
    """A retrieval failed (unreachable cluster, missing index, wrong vector dimension, timeout...).

    The message is shown in events and logs, so it never carries credentials."""


@dataclass
class RetrievalRequest:
    question: str
    kb_ids: list[str]
    top_n: int = 8
    top_k: int = 1024
    similarity_threshold: float = 0.2
    vector_similarity_weight: float = 0.5      # 1 - keywords_similarity_weight
    page: int = 1
    doc_ids: list[str] = field(default_factory=list)    # from a metadata filter; ["-999"] matches nothing
    rerank_id: str | None = None
    query_tags: dict[str, float] | None = None          # RAGFlow's rank_feature (tag KBs); None as a rule


@dataclass
class RetrievalResult:
    total: int = 0
    chunks: list[dict[str, Any]] = field(default_factory=list)   # Dealer.retrieval chunk dicts
    doc_aggs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)              # deviations taken (e.g. the BM25 fallback)


@runtime_checkable
class RetrievalBackend(Protocol):
    """A store of RAGFlow chunks. `describe()` names it without credentials (for messages)."""

    async def retrieve(self, request: RetrievalRequest) -> RetrievalResult: ...

    async def document_metadata(self, kb_ids: list[str]) -> dict[str, dict[str, list[str]]]:
        """{meta key: {value: [doc ids]}} over the datasets' documents, for manual metadata filters."""
        ...

    def describe(self) -> str: ...

    async def aclose(self) -> None: ...
