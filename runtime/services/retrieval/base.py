"""The retrieval flow every backend shares (RAGFlow's Dealer.retrieval and the agent tool around it).

A backend supplies four primitives: one search pass over its chunks (`search`), clean vector scores
for a window (`vector_scores`), chunks by id (`fetch`, for parent chunks) and the embedding model of
its datasets (`embd_id`). This class does the rest as RAGFlow does: the query text and vector, the
relaxed retry on an empty first pass, re-scoring, the threshold, the page, doc_aggs, parent chunks,
and the 12 s limit.
"""
from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from canvas2graph.runtime.services.retrieval import scoring
from canvas2graph.runtime.services.retrieval.config import RetrievalConfig
from canvas2graph.runtime.services.retrieval.embeddings import ModelEndpoints
from canvas2graph.runtime.services.retrieval.protocol import RetrievalError, RetrievalRequest, RetrievalResult
from canvas2graph.runtime.services.retrieval.query import FulltextQuery, QueryText

log = logging.getLogger(__name__)

RELAXED_MIN_MATCH = 0.1
RELAXED_SIMILARITY = 0.17
USER_PREFIX = re.compile(r"^user[:：\s]*", re.I)

BM25_FALLBACK_NOTE = ("no embedding model is configured for these datasets: ranked by text only (RAGFlow "
                      "always embeds; the vector weight is treated as 0 and no threshold applies)")


@dataclass
class Pass:
    """One search request: what to match and where."""
    kb_ids: list[str]
    size: int
    query: QueryText | None = None          # None: no text match (a plain filtered fetch, or kNN only)
    vector: list[float] | None = None
    similarity: float = 0.0                 # the kNN raw-cosine cut-off
    top_k: int = 1024
    doc_ids: list[str] = field(default_factory=list)
    query_tags: dict[str, float] | None = None


@dataclass
class Page:
    total: int
    candidates: list[scoring.Candidate]


class ScoringBackend:
    # RAGFlow always embeds, so ranking by text alone is worth a note; a store whose datasets were
    # indexed text-only by the user's choice (`index` without --embd-id, which says so) sets this
    text_only_by_choice = False

    def __init__(self, cfg: RetrievalConfig | None = None):
        self.cfg = cfg or RetrievalConfig()
        self.models = ModelEndpoints(self.cfg)
        self._fulltext: asyncio.Future | None = None
        self._query_builder: FulltextQuery | None = None      # once loaded, for every event loop

    # --- what a backend implements -------------------------------------------------------
    async def search(self, p: Pass) -> Page:
        raise NotImplementedError

    async def vector_scores(self, ids: list[str], vector: list[float], kb_ids: list[str]) -> dict[str, float]:
        raise NotImplementedError

    async def fetch(self, ids: list[str], kb_ids: list[str]) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    async def embd_id(self, kb_ids: list[str]) -> str | None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass

    # --- the shared flow -----------------------------------------------------------------
    def warm(self) -> None:
        """Start loading the tokenizer (about a second) so the first retrieval does not pay for it. A backend
        outlives event loops (a process's default environment serves one `asyncio.run` after another): a load
        begun in a loop that has closed since is begun again in this one."""
        if self._query_builder is not None:
            return
        loading = self._fulltext
        if loading is None or loading.get_loop() is not asyncio.get_running_loop() or loading.cancelled():
            self._fulltext = asyncio.ensure_future(asyncio.to_thread(FulltextQuery))

    async def fulltext(self) -> FulltextQuery:
        if self._query_builder is None:
            self.warm()
            self._query_builder = await asyncio.shield(self._fulltext)
        return self._query_builder

    async def retrieve(self, request: RetrievalRequest) -> RetrievalResult:
        try:
            return await asyncio.wait_for(self._retrieve(request), self.cfg.timeout)
        except asyncio.TimeoutError:
            raise RetrievalError(f"retrieval from {self.describe()} timed out after {self.cfg.timeout:g} s") from None

    async def _retrieve(self, req: RetrievalRequest) -> RetrievalResult:
        question = USER_PREFIX.sub("", req.question or "")
        kb_ids = [k for k in req.kb_ids if k]
        if not kb_ids:
            raise RetrievalError("no dataset selected: set dataset_ids (or kb_ids) on the Retrieval component")
        fq = await self.fulltext()
        notes: list[str] = []
        embd_id = await self.embd_id(kb_ids)
        vector = await self.models.embedder(embd_id).embed_query(question) if embd_id else None
        if vector is None:
            if self.cfg.strict:
                raise RetrievalError(f"no embedding model is configured for dataset(s) {', '.join(kb_ids)} "
                                     "(strict mode: set embd_id in the retrieval config)")
            if not self.text_only_by_choice:
                notes.append(BM25_FALLBACK_NOTE)
        reranking = bool(req.rerank_id)
        vw = req.vector_similarity_weight if (vector is not None or reranking) else 0.0
        window = scoring.window_size(req.top_n, req.top_k, reranking)
        qt = fq.question(question, 0.0 if vw >= 0.8 else 0.3)
        p = Pass(kb_ids, window, qt if qt.text else None, vector, req.similarity_threshold, req.top_k,
                 list(req.doc_ids), req.query_tags)
        page = await self.search(p)
        if page.total == 0 and vector is not None:
            if req.doc_ids:          # the metadata filter chose documents: fetch their chunks unscored
                page = await self.search(Pass(kb_ids, window, None, None, 0.0, req.top_k, list(req.doc_ids)))
            else:
                relaxed = fq.question(question, RELAXED_MIN_MATCH)
                page = await self.search(Pass(kb_ids, window, relaxed if relaxed.text else None, vector,
                                              RELAXED_SIMILARITY, req.top_k, [], req.query_tags))
        candidates = page.candidates
        if not candidates:
            return RetrievalResult(0, [], [], notes)
        rerank_scores = None
        if reranking:
            docs = [" ".join(scoring.rerank_token_list(c.fields)) for c in candidates]
            rerank_scores = await self.models.reranker(req.rerank_id).similarity(question, docs)
        elif vector is not None:
            found = await self.vector_scores([c.id for c in candidates], vector, kb_ids)
            for c in candidates:
                c.vector_score = found.get(c.id, 0.0)
        scored = scoring.score(fq.tw, qt.keywords, candidates, vw, req.query_tags, rerank_scores)
        total, chunks, doc_aggs = scoring.select(scored, threshold=req.similarity_threshold, vector_weight=vw,
                                                 page=req.page, page_size=req.top_n, window=window)
        moms = sorted({c["mom_id"] for c in chunks if c.get("mom_id")})
        if moms:
            chunks = scoring.with_parents(chunks, await self.fetch(moms, kb_ids))
        return RetrievalResult(total, chunks, doc_aggs, notes)
