"""Extractor (rag/flow/extractor/extractor.py): a model writes one field of every chunk.

The prompts reference a list of chunks (`{TokenChunker:X@chunks}`); the model is asked once per chunk
with that reference replaced by the chunk's text, and its answer is stored in the chunk under
`field_name` (`summary`, `keywords`, `questions`, `metadata`, ... which the Tokenizer and the store
read as RAGFlow's do); `toc` builds a table of contents instead (nodes/pipeline/toc.py). Without a list
among the references, one answer makes one chunk. The model
comes from `llm_id` (`--default-llm` fills an empty one; `--llm-script` answers offline).
"""
from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

from pydantic import field_validator

from canvas2graph.compiler.dsl.refs import Ref, Template, parse_template
from canvas2graph.nodes.llm import LLMParams, complete
from canvas2graph.nodes.pipeline.base import Job, PipelineNode, PipelineParams
from canvas2graph.nodes.registry import register_pipeline


class ExtractorParams(PipelineParams, LLMParams):
    field_name: str = ""

    @field_validator("field_name")
    @classmethod
    def _field(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("Result Destination (field_name) is empty: name the chunk field the answer goes to")
        return v


def _value(ref: Ref, outputs: dict[str, dict]) -> Any:
    if ref.kind != "component":
        return ""
    value: Any = (outputs.get(ref.name) or {}).get(ref.key)
    for step in ref.path:
        value = value.get(step) if isinstance(value, dict) else None
    return value


def _render(template: Template, values: dict[str, Any]) -> str:
    parts = []
    for part in template.spliced:
        if isinstance(part, str):
            parts.append(part)
        else:
            value = values.get(part.expr, "")
            parts.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return "".join(parts)


@register_pipeline("Extractor", ExtractorParams, outputs=lambda p: {"chunks", "output_format"})
class Extractor(PipelineNode):
    def prepare(self) -> None:
        self.sys_template = parse_template(self.params.sys_prompt or "")
        self.prompt_templates = [(str(p.get("role") or "user"), parse_template(p.get("content") or ""))
                                 for p in self.params.prompts]

    def references(self):
        refs = [("params.sys_prompt", r) for r in self.sys_template.refs]
        for i, (_, t) in enumerate(self.prompt_templates):
            refs += [(f"params.prompts.{i}.content", r) for r in t.refs]
        return refs

    def _messages(self, values: dict[str, Any]) -> list[dict[str, str]]:
        return [{"role": "system", "content": _render(self.sys_template, values)}] + \
            [{"role": role, "content": _render(t, values)} for role, t in self.prompt_templates]

    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        job.progress(0.01, "Start to generate.")
        values = {ref.expr: _value(ref, job.outputs) for _, ref in self.references()}
        list_key = next((k for k, v in values.items() if isinstance(v, list)), None)
        field, llm, gen = self.params.field_name, self.params.llm_id, self.params.gen_conf()
        if list_key is None:
            answer = await complete(llm, self.id, self._messages(values), job.ctx, gen)
            return {"output_format": "chunks", "chunks": [{field: answer}]}
        chunks = deepcopy(values[list_key])
        for i, chunk in enumerate(chunks):
            if not isinstance(chunk, dict):
                raise ValueError(f"{list_key}: item {i} is not a chunk (an object)")
        if field == "toc" and chunks:
            return {"output_format": "chunks", "chunks": await self._toc(chunks, job)}
        for i, chunk in enumerate(chunks):
            chunk[field] = await complete(llm, self.id, self._messages({**values, list_key: chunk.get("text", "")}),
                                          job.ctx, gen)
            if i % (len(chunks) // 100 + 1) == 1:
                job.progress((i + 1) / len(chunks), f"{i + 1} / {len(chunks)}")
        return {"output_format": "chunks", "chunks": chunks}

    async def _toc(self, chunks: list[dict], job: Job) -> list[dict]:
        """RAGFlow's `toc` field: the chunks with ids, and one more chunk holding the table of contents."""
        import asyncio
        from canvas2graph.nodes.pipeline.toc import build_toc, chunk_ids
        from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
        doc_id = str(job.file.get("doc_id") or job.file.get("name") or "")
        chunk_ids(chunks, doc_id)
        job.progress(0.2, "Start to generate table of content ...")

        async def ask(messages: list[dict[str, str]], gen_conf: dict) -> str:
            return await complete(self.params.llm_id, self.id, messages, job.ctx, gen_conf)
        toc = await build_toc(chunks, doc_id, ask, await asyncio.to_thread(get_tokenizer))
        return chunks + ([toc] if toc is not None else [])
