"""Tokenizer (rag/flow/tokenizer/tokenizer.py): the full-text fields and the embeddings of each chunk.

`full_text` writes RAGFlow's token fields with its own tokenizer (`canvas2graph.runtime.services.retrieval.tokenizer`):
`title_tks`/`title_sm_tks` from the file name, `content_ltks`/`content_sm_ltks` from the text (from the
`summary` when an Extractor wrote one), `question_kwd`/`question_tks` from `questions`,
`important_kwd`/`important_tks` from `keywords`. `embedding` writes `q_<dims>_vec`: the `fields`' text
embedded with the dataset's model, mixed with the file name's vector by `filename_embd_weight`. The
model is the dataset's (`canvas2graph ingest --embd-id`); a dataset without one stores text only.
"""
from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import Field, field_validator

from canvas2graph.nodes.pipeline.base import Job, PipelineNode, PipelineParams
from canvas2graph.nodes.pipeline.positions import finalize_chunk
from canvas2graph.nodes.registry import register_pipeline

TABLE_TAGS = re.compile(r"</?(table|td|caption|tr|th)( [^<>]{0,12})?>")
EMBED_BATCH = 16            # RAGFlow's EMBEDDING_BATCH_SIZE


class TokenizerParams(PipelineParams):
    search_method: list[str] = Field(default_factory=lambda: ["full_text", "embedding"])
    filename_embd_weight: float = Field(0.1, ge=0, le=1)
    fields: list[str] | str = Field(default_factory=lambda: ["text"])

    @field_validator("search_method")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        for m in v:
            if str(m).lower() not in ("full_text", "embedding"):
                raise ValueError(f"Chunk method abnormal: {m!r} (full_text or embedding)")
        return [str(m).lower() for m in v]


def _title(name: str) -> str:
    return re.sub(r"\.[a-zA-Z]+$", "", name)


def full_text(chunks: list[dict], name: str, tokenizer) -> None:
    title = tokenizer.tokenize(_title(name))
    title_sm = tokenizer.fine_grained(title)
    for i, ck in enumerate(chunks):
        ck["chunk_order_int"] = i
        ck["title_tks"], ck["title_sm_tks"] = title, title_sm
        if ck.get("questions"):
            ck["question_kwd"] = str(ck["questions"]).split("\n")
            ck["question_tks"] = tokenizer.tokenize(str(ck["questions"]))
        if ck.get("keywords"):
            ck["important_kwd"] = [k for k in re.split(r"[,，;；、\r\n]+", str(ck["keywords"])) if k.strip()]
            ck["important_tks"] = tokenizer.tokenize(str(ck["keywords"]))
        source = ck.get("summary") or ck.get("text")
        if isinstance(source, str) and source:
            ck["content_ltks"] = tokenizer.tokenize(source)
            ck["content_sm_ltks"] = tokenizer.fine_grained(ck["content_ltks"])


def embed_text(chunk: dict, fields: list[str]) -> str:
    text = ""
    for f in fields:
        value = chunk.get(f)
        text += value if isinstance(value, str) else "\n".join(map(str, value)) if isinstance(value, list) else ""
    return TABLE_TAGS.sub(" ", text).strip()


async def embed(chunks: list[dict], name: str, fields: list[str], weight: float, embedder, job: Job) -> None:
    pairs = [(ck, t) for ck in chunks if (t := embed_text(ck, fields))]
    if not pairs:
        return
    title_vec = (await embedder.embed_documents([name]))[0]
    for start in range(0, len(pairs), EMBED_BATCH):
        batch = pairs[start:start + EMBED_BATCH]
        vectors = await embedder.embed_documents([t for _, t in batch])
        for (ck, _), vec in zip(batch, vectors):
            mixed = [weight * a + (1 - weight) * b for a, b in zip(title_vec, vec)]
            ck[f"q_{len(mixed)}_vec"] = mixed
        job.progress(0.5 + 0.5 * min(1.0, (start + len(batch)) / len(pairs)), "")


def as_chunks(upstream: dict[str, Any]) -> list[dict]:
    fmt = upstream.get("output_format")
    if fmt == "chunks" and upstream.get("chunks") is not None:
        chunks = upstream["chunks"]
    elif fmt in ("markdown", "text", "html"):
        payload = upstream.get(fmt)
        if payload is None:
            raise ValueError(f"Input error: output_format={fmt} requires a {fmt} payload")
        return [{"text": payload}] if payload else []
    else:
        chunks = upstream.get("json")
        if chunks is None:
            raise ValueError("Input error: a JSON list payload (json or chunks) is required")
    if not isinstance(chunks, list):
        raise ValueError("Input error: chunks must be a list")
    return [dict(c) for c in chunks if isinstance(c, dict)]


@register_pipeline("Tokenizer", TokenizerParams, outputs=lambda p: {"chunks", "output_format",
                                                                    "embedding_token_consumption"})
class Tokenizer(PipelineNode):
    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
        p: TokenizerParams = self.params
        name = str(upstream.get("name") or job.file.get("name") or "")
        chunks = as_chunks(upstream)
        fields = [p.fields] if isinstance(p.fields, str) else list(p.fields)
        if "full_text" in p.search_method:
            job.progress(0.01, "Start to tokenize.")
            tokenizer = await asyncio.to_thread(get_tokenizer)
            await asyncio.to_thread(full_text, chunks, name, tokenizer)
            job.progress(0.5, "Finish tokenizing.")
        out: dict[str, Any] = {"output_format": "chunks"}
        if "embedding" in p.search_method:
            embedder = job.ctx.services.get("ingest_embedder")
            if embedder is None:
                job.progress(0.51, "No embedding model for this dataset: the chunks are stored for full-text search only.")
            else:
                job.progress(0.51, "Start embedding inference.")
                await embed(chunks, name, fields, p.filename_embd_weight, embedder, job)
                job.progress(1.0, "Finish embedding.")
            out["embedding_token_consumption"] = 0
        out["chunks"] = [finalize_chunk(ck) for ck in chunks]
        return out
