"""The Extractor's `toc` field (rag/flow/extractor `_build_TOC`, rag/prompts/generator.py `run_toc_from_text`).

RAGFlow gives every chunk an id (xxh64 of its text and the document id), orders the chunks by page and
top, and asks the model, per batch of chunks up to 1024 tokens (each line `{"<index>": "<text>"}`), for the
headings in them as `[{"title", "chunk_id"}]` ("-1" where a part has no heading). Headings that are
"-1", longer than 22 tokens (12 past 512 headings) or only digits and punctuation are dropped; the model
then gives each remaining title a depth (`[{"level": "1", "title"}]`, asked with the Python list of
titles). Each TOC entry gets the ids of the chunks from its own to the next entry's, and the TOC is one
more chunk: a copy of the last chunk with `toc` and `content_with_weight` the TOC's JSON,
`toc_kwd: "toc"`, `available_int: 0` (Retrieval does not return it), `page_num_int: [100000000]`.

The prompts are canvas2graph's wording asking for RAGFlow's reply shapes (as nodes/prompts.py's).
"""
from __future__ import annotations

import json
import re
from copy import deepcopy
from typing import Any, Awaitable, Callable

import xxhash

from canvas2graph.nodes.llm import parse_json_answer
from canvas2graph.nodes.pipeline.tokens import count_tokens

Ask = Callable[[list[dict[str, str]], dict[str, Any]], Awaitable[str]]
BATCH_TOKENS = 1024               # RAGFlow: min(1024, half the model's context less the prompts)
GEN_CONF = {"temperature": 0.0, "top_p": 0.9}

HEADINGS_SYSTEM = """\
You extract a table of contents from document chunks.
Each input line is a JSON object {"<chunk_id>": "<chunk text>"}. Find the headings in the chunks: short
phrases near the start of a line that introduce the text after them (numbered like "1.", "1.2", "(a)",
"Chapter 3", "第二章", or words such as Introduction, Scope, Method, Summary, Appendix).
Reply with a JSON array of {"title": "<heading text>", "chunk_id": "<chunk_id>"} in the order of the input.
- A chunk may hold several headings: list each, in order.
- Text of a chunk that is not a heading is {"title": "-1", "chunk_id": "<chunk_id>"}.
- Titles are cleaned of page numbers and leader dots and keep the input's language.
- Long sentences, prose and lists are not headings. When unsure, use "-1".
Return the JSON array only."""
HEADINGS_USER = "Reply with the JSON array only, with double quotes.\n\nINPUT\n{text}"
LEVELS_SYSTEM = """\
You are given a list of table-of-contents titles. Give each a depth: "1" for the top level, "2" below
it, and so on; peers share a depth. Keep the order and the titles exactly as given.
Reply with a JSON array only: [{"level": "1", "title": "<title>"}, ...]."""


def chunk_ids(chunks: list[dict[str, Any]], doc_id: str) -> None:
    for ck in chunks:
        ck["doc_id"] = doc_id
        ck["id"] = xxhash.xxh64((str(ck.get("text", "")) + str(doc_id)).encode("utf-8", "surrogatepass")).hexdigest()


def _first(value: Any) -> Any:
    return (value[0] if value else 0) if isinstance(value, list) else value


def batches(texts: list[str], budget: int = BATCH_TOKENS) -> list[list[dict[int, str]]]:
    """generator.split_chunks: [{index: text}] packed up to `budget` tokens; a long chunk stays whole."""
    out, batch, tokens = [], [], 0
    for i, text in enumerate(texts):
        n = count_tokens(text)
        if tokens + n > budget:
            out.append(batch)
            batch, tokens = [], 0
        batch.append({i: text})
        tokens += n
    if batch:
        out.append(batch)
    return out


async def build_toc(chunks: list[dict[str, Any]], doc_id: str, ask: Ask, tokenizer) -> dict[str, Any] | None:
    """The TOC chunk of `chunks` (which have their ids), or None when the model finds no headings."""
    docs = sorted(chunks, key=lambda d: (_first(d.get("page_num_int", 0)) or 0, _first(d.get("top_int", 0)) or 0))
    toc = await toc_from_text([str(d.get("text", "")) for d in docs], ask, tokenizer)
    for i, entry in enumerate(toc):
        try:
            idx = int(entry["chunk_id"])
            del entry["chunk_id"]
            entry["ids"] = [docs[idx]["id"]]
            if i + 1 < len(toc):
                entry["ids"] += [docs[j]["id"] for j in range(idx + 1, int(toc[i + 1]["chunk_id"]) + 1)]
        except (ValueError, TypeError, KeyError, IndexError):
            continue                 # RAGFlow logs an entry whose chunk id is not an index and goes on
    if not toc:
        return None
    d = deepcopy(docs[-1])
    d["doc_id"] = doc_id
    d["toc"] = d["content_with_weight"] = json.dumps(toc, ensure_ascii=False)
    d["toc_kwd"] = "toc"
    d["available_int"] = 0
    d["page_num_int"] = [100000000]
    d["id"] = xxhash.xxh64((d["content_with_weight"] + str(doc_id)).encode("utf-8", "surrogatepass")).hexdigest()
    return d


async def toc_from_text(texts: list[str], ask: Ask, tokenizer) -> list[dict[str, Any]]:
    """run_toc_from_text: headings per batch, filtered, then levelled by the model."""
    titles: list[Any] = []
    for batch in batches(texts):
        if not batch:               # split_chunks opens with an empty batch when the first chunk is too long
            continue
        text = "\n".join(json.dumps(item, ensure_ascii=False) for item in batch)
        found = parse_json_answer(await ask([{"role": "system", "content": HEADINGS_SYSTEM},
                                             {"role": "user", "content": HEADINGS_USER.format(text=text)}], GEN_CONF))
        titles += found if isinstance(found, list) else []
    max_len = 12 if len(titles) > 512 else 22
    kept = [x for x in titles if isinstance(x, dict) and x.get("title") and x["title"] != "-1"
            and len(tokenizer.tokenize(str(x["title"])).split(" ")) <= max_len
            and not re.match(r"[0-9,.()/ -]+$", str(x["title"]))]
    if not kept:
        return []
    levels = parse_json_answer(await ask([{"role": "system", "content": LEVELS_SYSTEM},
                                          {"role": "user", "content": str([x.get("title", "") for x in kept])}],
                                         GEN_CONF))
    normalized = []
    for item in levels if isinstance(levels, list) else []:
        if isinstance(item, dict):
            normalized.append(item)
        elif isinstance(item, (list, tuple)) and len(item) >= 2:
            normalized.append({"level": str(item[0]), "title": str(item[1])})
    if not normalized:
        return []
    prune = len(normalized) > 512
    max_level = max((str(t.get("level", "0")) for t in normalized), default="0")
    return [{"level": t.get("level", "0"), "title": t.get("title", ""), "chunk_id": src.get("chunk_id", "")}
            for t, src in zip(normalized, kept) if not (prune and str(t.get("level", "0")) >= max_level)]
