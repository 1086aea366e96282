"""TokenChunker (rag/flow/chunker/token_chunker.py): the parser's output cut into chunks.

Text payloads (`markdown`, `text`, `html`) are split on the delimiters and merged up to
`chunk_token_size` as RAGFlow's `naive_merge` does; JSON items are merged item by item (tables and
images stand alone, with `table_context_size` / `image_context_size` tokens of the text around them),
or, with backtick-wrapped delimiters, split on them across items. `children_delimiters` split each
chunk again, the whole chunk kept as the child's `mom`. `delimiter_mode: "one"` makes one chunk of
everything.
"""
from __future__ import annotations

import re
from copy import deepcopy
from typing import Any

from pydantic import Field, field_validator

from canvas2graph.nodes.pipeline.base import Job, PipelineNode, PipelineParams, text_of_item
from canvas2graph.nodes.pipeline.positions import PDF_POSITIONS_KEY, extract_positions, finalize_chunk, remove_tag
from canvas2graph.nodes.pipeline.tokens import count_tokens
from canvas2graph.nodes.registry import register_pipeline

SENTENCE_BOUNDARY = r"([。!?？；！\n]|\. )"
TEXT_FORMATS = ("markdown", "text", "html")


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    return [d for d in value if isinstance(d, str) and d]


class TokenChunkerParams(PipelineParams):
    delimiter_mode: str = "delimiter"
    chunk_token_size: int = Field(512, gt=0)
    delimiters: list[str] = Field(default_factory=lambda: ["\n"])
    overlapped_percent: float = Field(0, ge=0, le=1)          # a fraction, as RAGFlow checks it
    children_delimiters: list[str] = Field(default_factory=list)
    table_context_size: float = Field(0, ge=0)
    image_context_size: float = Field(0, ge=0)

    @field_validator("delimiter_mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> str:
        v = "delimiter" if v == "token_size" else v      # RAGFlow's former name of the same behaviour
        if v not in ("delimiter", "one"):
            raise ValueError("Delimiter mode abnormal: 'delimiter' or 'one'")
        return v

    @field_validator("delimiters", "children_delimiters", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> list[str]:
        return _strings(v)


def overlap_percent(value: Any) -> int:
    """RAGFlow's normalize_overlapped_percent: a fraction or a percentage, as a whole percentage <= 90."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0
    if 0 < v < 1:
        v *= 100
    return max(0, min(int(v), 90))


# --- the delimiter field ----------------------------------------------------------------------
def wrapped_pattern(delimiters: list[str]) -> str:
    """The backtick-wrapped delimiters (`` `##` ``) as one alternation, longest first; "" when none."""
    wrapped = {m.group(1) for m in re.finditer(r"`([^`]+)`", "".join(delimiters))}
    return "|".join(re.escape(t) for t in sorted(wrapped, key=len, reverse=True))


def field_pattern(field: str) -> str:
    """RAGFlow's parse_delimiter_field + compile_delimiter_pattern: every bare character and every
    backtick-wrapped token a delimiter, newlines normalised, longest first."""
    field = (field or "").replace("\r\n", "\n").replace("\r", "\n")
    found: list[str] = []
    cursor = 0
    for m in re.finditer(r"`([^`]+)`", field):
        found += list(field[cursor:m.start()]) + [m.group(1)]
        cursor = m.end()
    found += list(field[cursor:])
    unique = list(dict.fromkeys(d for d in found if d))
    return "|".join(re.escape(d) for d in sorted(unique, key=len, reverse=True))


def split_on(text: str, pattern: str) -> list[str]:
    """The pieces between delimiters (delimiters dropped, empty pieces too)."""
    if not pattern:
        return [text or ""]
    parts = re.split(f"({pattern})", text or "", flags=re.DOTALL)
    return [p for p in parts[0::2] if p]


# --- text payloads: naive_merge ----------------------------------------------------------------
def _overlap_prefix(previous: str, percent: int) -> str:
    visible = remove_tag(previous)
    return visible[int(len(visible) * (100 - percent) / 100.0):] if visible else ""


def group_paragraphs(paragraphs: list[str], budget: int, percent: int = 0) -> list[list[str]]:
    """RAGFlow's OVER_CAP grouping: a group takes paragraphs until its tokens pass the threshold
    (the budget less the overlap share), which lets the paragraph that crosses it in; a paragraph over
    the budget stands alone."""
    threshold = budget * (100 - percent) / 100.0
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for para in paragraphs:
        n = count_tokens(para)
        if n > budget:
            if current:
                groups.append(current)
            groups.append([para])
            current, size = [], 0
        elif not current:
            current, size = [para], n
        elif size > threshold:
            groups.append(current)
            current, size = [para], n
        else:
            current.append(para)
            size += n
    if current:
        groups.append(current)
    return groups


def naive_merge(text: str, budget: int, delimiter: str, percent: int) -> list[str]:
    """Paragraphs (each "\\n" + piece) grouped while the group holds no more than the threshold, an
    over-budget paragraph alone; each chunk after the first starts with the tail of the one before."""
    if not text:
        return []
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if wrapped_pattern([delimiter]):        # custom delimiters: every piece its own chunk
        return ["\n" + p for p in split_on(text, field_pattern(delimiter))]
    pattern = field_pattern(delimiter)
    paragraphs = ["\n" + p for p in split_on(text, pattern)] if pattern else ["\n" + text]
    groups = group_paragraphs(paragraphs, budget, percent)
    chunks = ["".join(g) for g in groups]
    if percent <= 0:
        return chunks
    out: list[str] = []
    for chunk in chunks:
        out.append(_overlap_prefix(out[-1], percent) + chunk if out else chunk)
    return out


# --- JSON items --------------------------------------------------------------------------------
def working_chunks(items: list[dict]) -> list[dict]:
    """Each upstream item as a working chunk: text, its kind, coordinates and token count."""
    chunks = []
    for item in items:
        kind = str(item.get("doc_type_kwd") or "").strip().lower()
        kind = kind if kind in ("table", "image") else "text"
        text = text_of_item(item)
        if kind == "text" and not text.strip():
            continue
        chunk = {"text": text, "doc_type_kwd": kind, PDF_POSITIONS_KEY: extract_positions(item),
                 "tk_nums": count_tokens(text)}
        if kind != "text":
            chunk.update(img_id=item.get("img_id"), context_above="", context_below="")
        chunks.append(chunk)
    return chunks


def _take_sentences(text: str, need: float, from_end: bool) -> str:
    parts = re.split(SENTENCE_BOUNDARY, text or "", flags=re.DOTALL)
    sentences = [parts[i] + (parts[i + 1] if i + 1 < len(parts) else "") for i in range(0, len(parts), 2)]
    collected = ""
    for s in (reversed(sentences) if from_end else sentences):
        collected = s + collected if from_end else collected + s
        if count_tokens(collected) >= need:
            break
    return collected


def attach_media_context(chunks: list[dict], table_size: float, image_size: float) -> None:
    """Tables and images get up to N tokens of the text before and after them (whole sentences)."""
    for i, chunk in enumerate(chunks):
        if chunk["doc_type_kwd"] == "text":
            continue
        size = image_size if chunk["doc_type_kwd"] == "image" else table_size
        if size <= 0:
            continue
        for step, key in ((-1, "context_above"), (1, "context_below")):
            remain, parts, j = size, [], i + step
            while 0 <= j < len(chunks) and remain > 0:
                other = chunks[j]
                if other["doc_type_kwd"] == "text":
                    if other["tk_nums"] >= remain:
                        parts.append(_take_sentences(other["text"], remain, from_end=step < 0))
                        break
                    parts.append(other["text"])
                    remain -= other["tk_nums"]
                j += step
            chunk[key] = "".join(reversed(parts) if step < 0 else parts)


def merge_by_tokens(chunks: list[dict], budget: int, percent: int) -> list[dict]:
    """Adjacent text items merged ("\\n"-joined) until a chunk passes the threshold; media break the run."""
    merged: list[dict] = []
    sources: list[list[tuple[str, list]] | None] = []
    last_text = -1
    threshold = budget * (100 - percent) / 100.0
    for chunk in chunks:
        current = deepcopy(chunk)
        if current["doc_type_kwd"] != "text":
            merged.append(current)
            sources.append(None)
            last_text = -1
            continue
        if last_text < 0 or merged[last_text]["tk_nums"] > threshold or current["tk_nums"] > budget:
            if last_text >= 0 and percent > 0 and merged[last_text]["text"]:
                visible = remove_tag(merged[last_text]["text"])
                start = int(len(visible) * (100 - percent) / 100.0)
                carried = _tail_positions(sources[last_text] or [], start) if 0 <= start < len(visible) else []
                current["text"] = (visible[start:] if 0 <= start < len(visible) else "") + current["text"]
                current[PDF_POSITIONS_KEY] = carried + current[PDF_POSITIONS_KEY]
                current["tk_nums"] = count_tokens(current["text"])
            merged.append(current)
            sources.append([(current["text"], list(current[PDF_POSITIONS_KEY]))])
            last_text = len(merged) - 1
            continue
        target = merged[last_text]
        target["text"] += ("\n" if target["text"] and current["text"] else "") + current["text"]
        target[PDF_POSITIONS_KEY].extend(current[PDF_POSITIONS_KEY])
        target["tk_nums"] += current["tk_nums"]
        sources[last_text].append((current["text"], list(current[PDF_POSITIONS_KEY])))
    return merged


def _tail_positions(items: list[tuple[str, list]], overlap_start: int) -> list:
    """The coordinates of the items that reach into a chunk's overlapping tail."""
    out, offset = [], 0
    total = sum(len(t) for t, _ in items) + max(0, len(items) - 1)
    for text, positions in items:
        start, end = offset, offset + len(text)
        if start < total and end > overlap_start:
            out.extend(positions)
        offset = end + 1
    return out


def split_across_items(chunks: list[dict], pattern: str) -> list[dict]:
    """Runs of text items joined with "\\n" and split on the delimiters; each piece keeps the
    coordinates of the items it overlaps. Media items stay as they are."""
    out: list[dict] = []
    run: list[dict] = []

    def flush() -> None:
        if not run:
            return
        spans, offset = [], 0
        for c in run:
            spans.append((offset, offset + len(c["text"]), c[PDF_POSITIONS_KEY]))
            offset += len(c["text"]) + 1
        combined = "\n".join(c["text"] for c in run)
        pos = 0
        raw = re.split(f"({pattern})", combined, flags=re.DOTALL)
        for i in range(0, len(raw), 2):
            piece, start = raw[i], pos
            pos += len(piece) + (len(raw[i + 1]) if i + 1 < len(raw) else 0)
            if not piece.strip():
                continue
            end = start + len(piece)
            positions = [p for s, e, ps in spans if start < e and s < end for p in ps]
            out.append({"text": piece, "doc_type_kwd": "text", PDF_POSITIONS_KEY: positions,
                        "tk_nums": count_tokens(piece)})
        run.clear()

    for c in chunks:
        if c["doc_type_kwd"] == "text":
            run.append(c)
        else:
            flush()
            out.append(c)
    flush()
    return out


def split_children(chunks: list[dict], pattern: str) -> list[dict]:
    """children_delimiters: each text chunk split again; the children keep the whole chunk as `mom`."""
    if not pattern:
        return chunks
    out = []
    for chunk in chunks:
        if chunk.get("doc_type_kwd", "text") != "text":
            out.append(chunk)
            continue
        mom = chunk.get("text", "").removeprefix("\n")
        for piece in split_on(chunk.get("text", ""), pattern):
            if piece.strip():
                out.append({**deepcopy(chunk), "mom": mom, "text": piece})
    return out


def finish(chunks: list[dict]) -> list[dict]:
    """The chunks as the component outputs them: context around media, coordinate tags gone."""
    docs = []
    for c in chunks:
        text = remove_tag((c.get("context_above") or "") + (c.get("text") or "") + (c.get("context_below") or ""))
        if not text.strip():
            continue
        doc = {"text": text, "doc_type_kwd": c.get("doc_type_kwd", "text")}
        for key in (PDF_POSITIONS_KEY, "mom", "img_id"):
            if c.get(key):
                doc[key] = deepcopy(c[key])
        docs.append(finalize_chunk(doc))
    return docs


@register_pipeline("TokenChunker", TokenChunkerParams, outputs=lambda p: {"chunks", "output_format"})
class TokenChunker(PipelineNode):
    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        p: TokenChunkerParams = self.params
        wrapped = wrapped_pattern(p.delimiters)
        children = "|".join(re.escape(t) for t in sorted(set(p.children_delimiters), key=len, reverse=True))
        percent = overlap_percent(p.overlapped_percent)
        job.progress(0.01, "Start to split into chunks.")
        fmt = upstream.get("output_format")
        if fmt in TEXT_FORMATS:
            payload = upstream.get(fmt) or ""
            if not isinstance(payload, str):
                raise ValueError(f"Input error: {fmt} must be a string")
            if p.delimiter_mode == "one":
                return {"output_format": "chunks", "chunks": [{"text": remove_tag(payload)}] if payload.strip() else []}
            pieces = split_on(payload, wrapped) if wrapped else \
                naive_merge(payload, p.chunk_token_size, "".join(p.delimiters), percent)
            if children:
                chunks = [{"text": t, "mom": c.removeprefix("\n")} for c in pieces if c.strip()
                          for t in split_on(c, children) if t.strip()]
            else:
                chunks = [{"text": c.strip()} for c in pieces if c.strip()]
            return {"output_format": "chunks", "chunks": chunks}
        items = upstream.get("chunks") if fmt == "chunks" else upstream.get("json")
        if items is not None and not (isinstance(items, list) and all(isinstance(i, dict) for i in items)):
            raise ValueError("Input error: the upstream's json must be a list of objects")
        items = items or []
        if p.delimiter_mode == "one":
            text = "\n".join(remove_tag(t) for t in (text_of_item(i) for i in items) if t.strip())
            return {"output_format": "chunks", "chunks": [{"text": text}] if text.strip() else []}
        chunks = working_chunks(items)
        if wrapped:
            chunks = split_children(split_across_items(chunks, wrapped), children)
            attach_media_context(chunks, p.table_context_size, p.image_context_size)
        else:
            attach_media_context(chunks, p.table_context_size, p.image_context_size)
            chunks = split_children(merge_by_tokens(chunks, p.chunk_token_size, percent), children)
        return {"output_format": "chunks", "chunks": finish(chunks)}
