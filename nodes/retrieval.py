"""Retrieval: find knowledge-base chunks for a query, as a canvas node and as an Agent tool (SPEC 3.17, 6.4).

Chunks enter the turn's reference store keyed as RAGFlow keys them (sha1 of the chunk id, mod 500),
so `[ID:n]` citations and `message_end.reference` line up. Under `--llm-script` the script's
`retrieval` chunks are what every retrieval returns; otherwise a retrieval backend must be configured.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from nodes.base import Params
from nodes.registry import register
from nodes.tool import Tool, ToolArg, ToolOutput, found


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


async def search(params: RetrievalParams, query: str, ctx) -> list[dict]:
    if ctx is not None and ctx.script is not None and ctx.script.retrieval is not None:
        chunks = scripted_chunks(ctx.script.retrieval, (params.datasets() or [""])[0])
        return chunks[: params.top_n]
    backend = (ctx.extras.get("retrieval") if ctx is not None else None)
    if backend is None:
        raise RetrievalUnavailable("no retrieval backend is configured for this run")
    return await backend.search(query=query, params=params)


@register("Retrieval", RetrievalParams, outputs=lambda p: {"formalized_content", "json"})
class Retrieval(Tool):
    function_name = "search_my_dateset"        # sic: the name RAGFlow exposes to models
    tool_description = "Search the knowledge base for passages relevant to the query."
    args = {"query": ToolArg("string", "The question or keywords to search for.", required=True)}

    def thoughts(self, state) -> str:
        return f"Keywords: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = str(args.get("query") or "").strip()
        if not query:
            return ToolOutput({"formalized_content": ""})
        chunks = await search(self.params, query, ctx)
        return found(chunks, [raw_chunk(c) for c in chunks], empty=self.params.empty_response or "")
