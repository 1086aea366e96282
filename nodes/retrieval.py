"""Retrieval: find knowledge-base chunks for a query, as a canvas node and as an Agent tool (SPEC 3.17, 6.4).

Chunks enter the turn's reference store keyed as RAGFlow keys them (sha1 of the chunk id, mod 500),
so `[ID:n]` citations and `message_end.reference` line up. Under `--llm-script` the script's
`retrieval` chunks are what every retrieval returns; otherwise the run's retrieval backend
(`canvas2graph.runtime.services.retrieval`: RAGFlow's Elasticsearch indexes or the embedded store) answers, as RAGFlow's
`Dealer.retrieval` would. Options that need an LLM (cross_languages, toc_enhance, use_kg and the
automatic metadata filters) are reported as unsupported, at compile time and in the log.
"""
from __future__ import annotations

import logging
from typing import Any

from pydantic import Field

from canvas2graph.nodes.base import Params, Result, bare_or_braced_ref, settle_pending
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, found
from canvas2graph.runtime.graph.state import REFERENCE
from canvas2graph.runtime.graph.values import render, resolve

log = logging.getLogger(__name__)
KB_IDS_ARG = "__kb_ids"       # dataset ids resolved from canvas variables, passed from run() to execute()
USER_ARG = "__user_id"        # the memory user, resolved from canvas variables, passed the same way
MEMORY_TEXT_BUDGET = 194_000  # tokens of memories a Retrieval hands on at most (RAGFlow's 200,000 x 0.97)


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
    cross_languages: list[str] | None = Field(default_factory=list)
    toc_enhance: bool | None = False
    use_kg: bool | None = False
    meta_data_filter: dict[str, Any] | None = Field(default_factory=dict)
    retrieval_from: str | None = ""         # "dataset" or "memory" (issue 35); unset: datasets if any, else memories
    memory_ids: list[str] = Field(default_factory=list)
    user_id: str | None = ""                # only this user's memories: a literal or a {variable}

    def datasets(self) -> list[str]:
        return list(self.dataset_ids or self.kb_ids or [])

    def source(self) -> str:
        """Where this Retrieval searches: "dataset", "memory" or "" (nowhere: it answers empty_response)."""
        if self.retrieval_from in ("dataset", "memory"):
            return self.retrieval_from
        return "dataset" if self.datasets() else "memory" if self.memory_ids else "dataset"

    def unsupported(self) -> list[tuple[str, str]]:
        """(field, why) for each option set here that needs an LLM, which retrieval does not call."""
        out = []
        if self.cross_languages:
            out.append(("cross_languages", "translating the query with an LLM is not supported; the query is searched as written"))
        if self.toc_enhance:
            out.append(("toc_enhance", "LLM table-of-contents selection is not supported; chunks are returned as ranked"))
        if self.use_kg:
            out.append(("use_kg", "knowledge-graph retrieval is not supported; no graph summary chunk is added"))
        method = (self.meta_data_filter or {}).get("method")
        if method in ("auto", "semi_auto"):
            out.append(("meta_data_filter", f"the {method} metadata filter needs an LLM and is not supported; "
                                            "no document filter is applied"))
        return out


def chunks_format(c: dict) -> dict:
    """RAGFlow's chunks_format: a retrieved chunk as the reference store and citations carry it."""
    return {"id": c["chunk_id"], "content": c.get("content_with_weight", ""), "document_id": c.get("doc_id", ""),
            "document_name": c.get("docnm_kwd", ""), "dataset_id": c.get("kb_id", ""), "image_id": c.get("image_id", ""),
            "positions": c.get("positions", []), "url": c.get("url"), "similarity": c.get("similarity"),
            "vector_similarity": c.get("vector_similarity"), "term_similarity": c.get("term_similarity"),
            "row_id": c.get("row_id"), "doc_type": c.get("doc_type_kwd", ""), "document_metadata": None}


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


async def search(params: RetrievalParams, query: str, ctx, kb_ids: list[str] | None = None,
                 component_id: str = "Retrieval") -> tuple[list[dict], list[dict], list[dict] | None]:
    """(chunks in chunks_format, the `json` output, doc_aggs or None) for one query."""
    if ctx is not None and ctx.script is not None and ctx.script.retrieval is not None:
        chunks = scripted_chunks(ctx.script.retrieval, (params.datasets() or [""])[0])[: params.top_n]
        return chunks, [raw_chunk(c) for c in chunks], None
    backend = (ctx.extras.get("retrieval") if ctx is not None else None)
    if backend is None:
        raise RetrievalUnavailable("no retrieval backend is configured for this run")
    from canvas2graph.runtime.services.retrieval.tenants import for_tenant
    backend = for_tenant(backend, ctx.extras.get("tenant"))      # a server tenant's own datasets, not others'
    from canvas2graph.runtime.services.retrieval import RetrievalRequest
    from canvas2graph.runtime.services.retrieval.metadata import doc_filter
    for field, why in params.unsupported():
        log.warning("%s: %s: %s", component_id, field, why)
    kb_ids = list(kb_ids if kb_ids is not None else params.datasets())
    doc_ids: list[str] = []
    mdf = params.meta_data_filter or {}
    if mdf.get("method") == "manual" and mdf.get("manual"):
        doc_ids = doc_filter(await backend.document_metadata(kb_ids), list(mdf["manual"]), mdf.get("logic", "and"))
    request = RetrievalRequest(question=query, kb_ids=kb_ids, top_n=params.top_n, top_k=params.top_k,
                               similarity_threshold=params.similarity_threshold,
                               vector_similarity_weight=1 - params.keywords_similarity_weight,
                               doc_ids=doc_ids, rerank_id=params.rerank_id or None)
    result = await backend.retrieve(request)
    for note in result.notes:
        log.warning("%s: %s", component_id, note)
    return [chunks_format(c) for c in result.chunks], list(result.chunks), result.doc_aggs


@register("Retrieval", RetrievalParams, outputs=lambda p: {"formalized_content", "json"})
class Retrieval(Tool):
    function_name = "search_my_dateset"        # sic: the name RAGFlow exposes to models
    tool_description = "Search the knowledge base for passages relevant to the query."
    args = {"query": ToolArg("string", "The question or keywords to search for.", required=True)}

    def prepare_tool(self) -> None:
        # dataset ids given as canvas variables (`{sys.kb}`, `Begin@kb`) are resolved when the node runs
        self.dataset_sources = [(bare_or_braced_ref(d) if "@" in d or d.startswith(("sys.", "env.", "{")) else None, d)
                                for d in self.params.datasets()]
        user_id = (self.params.user_id or "").strip()
        self.user_template = self.text_template(user_id) if user_id else None

    def references(self):
        return super().references() + [("params.dataset_ids", ref) for ref, _ in self.dataset_sources if ref is not None] \
            + [("params.user_id", r) for r in (self.user_template.refs if self.user_template else [])]

    def warnings(self) -> list[tuple[str, str, str]]:
        found = [("unsupported-option", why, f"params.{field}") for field, why in self.params.unsupported()]
        if self.params.source() == "memory" and not self.params.memory_ids:
            found.append(("no-memory", "retrieval_from is \"memory\" but no memory is selected: every search fails",
                          "params.memory_ids"))
        return found

    def thoughts(self, state) -> str:
        return f"Keywords: {self.node_args(state).get('query', '')}"

    def dataset_ids(self, state) -> list[str]:
        out: list[str] = []
        for ref, literal in self.dataset_sources:
            value = resolve(state, ref) if ref is not None else literal
            for v in value if isinstance(value, list) else [value]:
                if v not in (None, "") and str(v) not in out:
                    out.append(str(v))
        return out

    def memory_user(self, state) -> str:
        if self.user_template is None:
            return ""
        return render(self.user_template, state)

    async def run(self, state, ctx) -> Result:
        state, writes = await settle_pending(self, [r for _, r in self.references()], state, ctx)
        args = self.node_args(state)
        extra = {KB_IDS_ARG: self.dataset_ids(state), USER_ARG: self.memory_user(state)}
        outputs, reference, _ = await self.call({**args, **extra}, ctx, retry=False)
        if reference["chunks"] or reference["doc_aggs"]:
            writes[REFERENCE] = reference
        return Result(outputs=outputs, inputs=args, writes=writes)

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = str(args.get("query") or "").strip()
        if not query:
            return ToolOutput({"formalized_content": ""})
        if self.params.source() == "memory":
            user = args.get(USER_ARG)
            if user is None and self.user_template is not None and not self.user_template.refs:
                user = self.params.user_id      # as an Agent's tool: a literal user (variables need the canvas)
            return await self._from_memory(query, str(user or ""), ctx)
        kb_ids = args.get(KB_IDS_ARG)
        if kb_ids is None and any(ref is not None for ref, _ in self.dataset_sources):
            kb_ids = [lit for ref, lit in self.dataset_sources if ref is None]     # as a tool: literal ids only
        chunks, raw, doc_aggs = await search(self.params, query, ctx, kb_ids, self.id)
        return found(chunks, raw, empty=self.params.empty_response or "", doc_aggs=doc_aggs)

    async def _from_memory(self, query: str, user_id: str, ctx) -> ToolOutput:
        """RAGFlow's Retrieval from memories: the messages most like the query, their contents one per line."""
        from canvas2graph.nodes.memory_access import book_for
        from canvas2graph.runtime.services.memory import MemoryNotFound
        if not self.params.memory_ids:
            raise ToolError("params.memory_ids: no memory is selected")
        book = book_for(ctx, self.id, "params.memory_ids")
        found = await book.find(self.params.memory_ids)
        missing = [m for m in self.params.memory_ids if m not in {f.id for f in found}]
        if missing:
            raise ToolError(f"params.memory_ids: {MemoryNotFound(f'Memory {missing} not found.')}")
        messages = await book.search([m.id for m in found], query, similarity_threshold=self.params.similarity_threshold,
                                     keywords_similarity_weight=self.params.keywords_similarity_weight,
                                     top_n=self.params.top_n, user_id=user_id)
        for note in book.notes:
            log.warning("%s: %s", self.id, note)
        contents, used = [], 0
        for m in messages:
            used += len(m.content) // 4 + 1         # about 4 characters a token
            if used > MEMORY_TEXT_BUDGET:
                break
            contents.append(m.content)
        if not contents:
            return ToolOutput({"formalized_content": self.params.empty_response or "", "json": []})
        return ToolOutput({"formalized_content": "\n".join(contents), "json": [m.api() for m in messages[:len(contents)]]})
