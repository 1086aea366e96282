"""A pipeline's final outputs -> the chunks a dataset stores, in RAGFlow's fields.

What RAGFlow's task executor does after a pipeline run (rag/svr/task_executor.py `run_dataflow`): the
last component's `chunks` (else `json`, else the text payload as one chunk) get the document's ids and
times, `questions` become `question_kwd`/`question_tks`, `keywords` `important_kwd`/`important_tks`,
a `summary` the full-text content, `metadata` the document's metadata, and `text` the stored
`content_with_weight`. Vectors (`q_<dims>_vec`) are kept apart for the store.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any

from canvas2graph.runtime.services.retrieval.indexing import chunk_id

VECTOR_KEY = re.compile(r"^q_\d+_vec$")


def payload_chunks(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks in a pipeline's last outputs, as run_dataflow normalises them."""
    if "chunks" in outputs and outputs["chunks"] is not None:
        return [dict(c) for c in outputs["chunks"] if isinstance(c, dict)]
    if outputs.get("json") is not None:
        return [dict(c) for c in outputs["json"] if isinstance(c, dict)]
    for key in ("markdown", "text", "html"):
        if key in outputs:
            return [{"text": outputs[key]}] if outputs[key] else []
    return []


def _metadata(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def stored_chunks(chunks: list[dict[str, Any]], *, doc_id: str, kb_id: str, name: str,
                  tokenizer) -> tuple[list[dict], list[list[float] | None], dict[str, Any]]:
    """(fields, vectors, document metadata) for the store."""
    now = time.time()
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    fields_out, vectors, metadata = [], [], {}
    for order, ck in enumerate(chunks):
        text = ck.get("text")
        text = "\n".join(map(str, text)) if isinstance(text, list) else str(text or "")
        ck = {k: v for k, v in ck.items() if k != "text"}
        vector = next((ck.pop(k) for k in list(ck) if VECTOR_KEY.match(k)), None)
        ck.update(doc_id=doc_id, kb_id=kb_id, docnm_kwd=name, create_time=created, create_timestamp_flt=now)
        ck.setdefault("chunk_order_int", order)
        ck.setdefault("available_int", 1)
        if "questions" in ck:
            if "question_tks" not in ck:
                ck["question_kwd"] = str(ck["questions"]).split("\n")
                ck["question_tks"] = tokenizer.tokenize(str(ck["questions"]))
            del ck["questions"]
        if "keywords" in ck:
            if "important_tks" not in ck:
                ck["important_kwd"] = [k for k in re.split(r"[,，;；、\r\n]+", str(ck["keywords"])) if k.strip()]
                ck["important_tks"] = tokenizer.tokenize(str(ck["keywords"]))
            del ck["keywords"]
        if "summary" in ck:
            if "content_ltks" not in ck:
                ck["content_ltks"] = tokenizer.tokenize(str(ck["summary"]))
                ck["content_sm_ltks"] = tokenizer.fine_grained(ck["content_ltks"])
            del ck["summary"]
        if "metadata" in ck:
            metadata.update(_metadata(ck.pop("metadata")))
        ck.setdefault("content_with_weight", text)
        _positions(ck)
        ck["id"] = ck.get("id") or chunk_id(text, doc_id)
        fields_out.append(ck)
        vectors.append(vector)
    return fields_out, vectors, metadata


def _positions(ck: dict[str, Any]) -> None:
    """PDF coordinates a chunk still carries as a parser item's (a pipeline that ends before a chunker)
    into RAGFlow's indexed fields; the chunkers' chunks have them already. RAGFlow's `add_positions`
    adds one to the page here, which the Parser already counts from 1: pages are kept as given."""
    from canvas2graph.nodes.pipeline.positions import PDF_POSITIONS_KEY, finalize_chunk
    if "position_int" not in ck and (ck.get("positions") or ck.get(PDF_POSITIONS_KEY)):
        finalize_chunk(ck)
    ck.pop("positions", None)
    ck.pop(PDF_POSITIONS_KEY, None)


def embed_texts(chunks: list[dict[str, Any]]) -> list[str]:
    """What run_dataflow embeds when the pipeline wrote no vectors: questions, else summary, else text."""
    out = []
    for c in chunks:
        value = c.get("questions", c.get("summary", c.get("text")))
        out.append("\n".join(map(str, value)) if isinstance(value, list) else str(value or ""))
    return out
