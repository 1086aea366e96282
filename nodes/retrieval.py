"""Retrieval: find knowledge-base chunks for a query, as a canvas node and as an Agent tool (SPEC 3.17, 6.4).

Chunks enter the turn's reference store keyed as RAGFlow keys them (sha1 of the chunk id, mod 500),
so `[ID:n]` citations and `message_end.reference` line up. Under `--llm-script` the script's
`retrieval` chunks are what every retrieval returns; otherwise a retrieval backend must be configured.
"""
from __future__ import annotations

import hashlib
from typing import Any

from pydantic import Field

from nodes.base import Node, Params, Result, bare_or_braced_ref, settle_pending
from nodes.registry import register
from runtime.state import REFERENCE
from runtime.values import as_json_text, resolve


class RetrievalUnavailable(Exception):
    pass


class RetrievalParams(Params):
    query: str = ""
    similarity_threshold: float = Field(0.2, ge=0, le=1)
    keywords_similarity_weight: float = Field(0.5, ge=0, le=1)
    top_n: int = Field(8, gt=0)
    top_k: int = Field(1024, gt=0)
    dataset_ids: list[str] = Field(default_factory=list)
    kb_ids: list[str] = Field(default_factory=list)
    rerank_id: str | None = ""
    empty_response: str | None = ""

    def datasets(self) -> list[str]:
        return list(self.dataset_ids or self.kb_ids or [])


def chunk_key(chunk_id: str) -> str:
    """RAGFlow's hash_str2int(chunk_id, 500): the n of `[ID:n]` (collisions are possible, as there)."""
    return str(int(hashlib.sha1(chunk_id.encode("utf-8")).hexdigest(), 16) % 500)


def scripted_chunks(raw: list[dict], dataset: str) -> list[dict]:
    """The script's chunks in RAGFlow's chunks_format shape."""
    out = []
    for i, c in enumerate(raw):
        out.append({"id": c.get("id") or f"chunk-{i}", "content": c.get("content", ""),
                    "document_id": c.get("doc_id", ""), "document_name": c.get("docnm_kwd", ""),
                    "dataset_id": c.get("kb_id") or dataset, "image_id": c.get("image_id", ""),
                    "positions": c.get("positions", []), "url": c.get("url"),
                    "similarity": c.get("similarity", 0.9), "vector_similarity": c.get("vector_similarity", c.get("similarity", 0.9)),
                    "term_similarity": c.get("term_similarity", c.get("similarity", 0.9)), "row_id": c.get("row_id"),
                    "doc_type": c.get("doc_type", ""), "document_metadata": c.get("document_metadata")})
    return out


def raw_chunk(c: dict) -> dict:
    """A chunk as the index stores it: what RAGFlow's Retrieval puts in its `json` output."""
    return {"chunk_id": c["id"], "content_with_weight": c["content"], "doc_id": c["document_id"],
            "docnm_kwd": c["document_name"], "kb_id": c["dataset_id"], "important_kwd": [], "tag_kwd": [],
            "image_id": c["image_id"], "similarity": c["similarity"], "vector_similarity": c["vector_similarity"],
            "term_similarity": c["term_similarity"], "positions": c["positions"], "doc_type_kwd": c["doc_type"],
            "mom_id": "", "row_id": c["row_id"]}


def references_of(chunks: list[dict]) -> dict[str, Any]:
    """The reference-store entries for these chunks: {chunks: {n: chunk}, doc_aggs: {name: agg}}."""
    store: dict[str, Any] = {"chunks": {}, "doc_aggs": {}}
    for c in chunks:
        store["chunks"][chunk_key(c["id"])] = c
        agg = store["doc_aggs"].setdefault(c["document_name"], {"doc_name": c["document_name"], "doc_id": c["document_id"], "count": 0})
        agg["count"] += 1
    return store


def formalize(chunks: list[dict]) -> str:
    """Chunk blocks the model reads, each headed by the id it must cite."""
    blocks = []
    for c in chunks:
        lines = [f"ID: {chunk_key(c['id'])}", f"├── Title: {c['document_name']}"]
        if c.get("url"):
            lines.append(f"├── URL: {c['url']}")
        lines.append("└── Content:")
        lines.append(c["content"])
        blocks.append("\n".join(lines))
    return "\n" + "\n\n".join(blocks)


async def search(params: RetrievalParams, query: str, ctx) -> list[dict]:
    if ctx is not None and ctx.script is not None:
        chunks = scripted_chunks(ctx.script.retrieval, (params.datasets() or [""])[0])
        return chunks[: params.top_n]
    backend = (ctx.extras.get("retrieval") if ctx is not None else None)
    if backend is None:
        raise RetrievalUnavailable("no retrieval backend is configured for this run")
    return await backend.search(query=query, params=params)


@register("Retrieval", RetrievalParams, outputs=lambda p: {"formalized_content", "json"})
class Retrieval(Node):
    function_name = "search_my_dateset"        # sic: the name RAGFlow exposes to models
    tool_description = "Search the knowledge base for passages relevant to the query."
    tool_parameters = {"query": {"type": "string", "description": "The question or keywords to search for."}}
    tool_required = ["query"]

    def prepare(self) -> None:
        self.query_ref = bare_or_braced_ref(self.params.query)
        self.query_text = None if self.query_ref else self.text_template(self.params.query)

    def references(self):
        if self.query_ref:
            return [("params.query", self.query_ref)]
        return [("params.query", r) for r in self.query_text.refs]

    def thoughts(self, state) -> str:
        return f"Keywords: {self._query(state)}"

    def _query(self, state) -> str:
        from runtime.values import render
        if self.query_ref:
            return as_json_text(resolve(state, self.query_ref))
        return render(self.query_text, state)

    async def run(self, state, ctx) -> Result:
        state, writes = await settle_pending(self, [r for _, r in self.references()], state, ctx)
        query = self._query(state)
        outputs, store = await self.call({"query": query}, ctx)
        if store["chunks"]:
            writes[REFERENCE] = store
        return Result(outputs=outputs, inputs={"query": query}, writes=writes)

    async def call(self, args: dict, ctx) -> tuple[dict, dict]:
        """Run as a tool or node: (outputs, reference-store entries)."""
        query = str(args.get("query") or "").strip()
        if not query:
            return {"formalized_content": ""}, {"chunks": {}, "doc_aggs": {}}
        chunks = await search(self.params, query, ctx)
        if not chunks:
            return {"formalized_content": self.params.empty_response or "", "json": []}, {"chunks": {}, "doc_aggs": {}}
        return {"formalized_content": formalize(chunks), "json": [raw_chunk(c) for c in chunks]}, references_of(chunks)
