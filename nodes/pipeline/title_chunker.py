"""TitleChunker (rag/flow/chunker/title_chunker): chunks cut at headings.

The input becomes line records (each line of a text payload, or each JSON item). Each record gets a
heading level: from a PDF's outline when it covers the document, else from `levels`, a list of regex
families (the family matching most lines is used; its Nth pattern is level N), else layout-tagged
titles. `method: "hierarchy"` builds the heading tree and makes one chunk per heading at the
`hierarchy`-th level found (its ancestors' headings first; with `include_heading_content`, a heading's
own body is a chunk too); `method: "group"` keeps records together while they stay in one section
(small groups absorb the next record). `root_chunk_as_heading` prefixes every chunk with the first,
and `chunk_token_cap` (128-8000, 0 for none) re-splits longer text chunks on sentence boundaries.
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from copy import deepcopy
from typing import Any

from pydantic import model_validator

from canvas2graph.nodes.pipeline.base import Job, PipelineNode, PipelineParams
from canvas2graph.nodes.pipeline.positions import PDF_POSITIONS_KEY, extract_positions, finalize_chunk, remove_tag
from canvas2graph.nodes.pipeline.token_chunker import SENTENCE_BOUNDARY
from canvas2graph.nodes.pipeline.tokens import count_tokens, truncate
from canvas2graph.nodes.registry import register_pipeline

BODY = sys.maxsize - 1          # the level of a line that is no heading
MIN_GROUP_TOKENS = 32


class TitleChunkerParams(PipelineParams):
    method: str = "hierarchy"
    levels: list[list[str]] = []
    hierarchy: int | None = None
    include_heading_content: bool = False
    root_chunk_as_heading: bool = False
    chunk_token_cap: int | None = 512

    @model_validator(mode="after")
    def _check(self) -> "TitleChunkerParams":
        if self.method not in ("hierarchy", "group"):
            raise ValueError(f"Unsupported TitleChunker method {self.method!r}: 'hierarchy' or 'group'")
        if not self.levels:
            raise ValueError("Hierarchical setups (levels) are empty")
        for group in self.levels:
            for pattern in group:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise ValueError(f"levels: {pattern!r} is not a regular expression ({e})") from None
        if self.method == "hierarchy" and not self.hierarchy:
            raise ValueError("Hierarchy number is empty")
        if self.chunk_token_cap and not 128 <= int(self.chunk_token_cap) <= 8000:
            raise ValueError("Chunk token cap must be between 128 and 8000.")
        return self


def not_bullet(line: str) -> bool:
    return any(re.match(p, line) for p in (r"0", r"[0-9]+ +[0-9~个只-]", r"[0-9]+\.{2,}", r"[0-9]+(\.[0-9]+){2,}[的中]"))


def not_title(text: str) -> bool:
    if re.match(r"第[零一二三四五六七八九十百0-9]+条", text):
        return False
    if len(text.split()) > 12 or (" " not in text and len(text) >= 32):
        return True
    return bool(re.search(r"[,;，。；！!]", text))


def line_records(upstream: dict[str, Any]) -> list[dict[str, Any]]:
    fmt = upstream.get("output_format")
    if fmt in ("markdown", "text", "html"):
        lines = str(upstream.get(fmt) or "").split("\n")
        lines = [ln.strip() for ln in lines if ln.strip()] if fmt == "text" else [ln for ln in lines if ln.strip()]
        return [{"text": ln, "doc_type_kwd": "text", "img_id": None, "layout": "", PDF_POSITIONS_KEY: []} for ln in lines]
    items = upstream.get("chunks") if fmt == "chunks" else upstream.get("json")
    return [{"text": item.get("text") or "", "doc_type_kwd": str(item.get("doc_type_kwd") or "text"),
             "img_id": item.get("img_id"),
             "layout": f"{item.get('layout_type', '')} {item.get('layoutno', '')}".strip(),
             PDF_POSITIONS_KEY: extract_positions(item)} for item in items or [] if isinstance(item, dict)]


def pdf_outlines(file: dict[str, Any] | None) -> list[tuple[str, int, int]]:
    """(title, depth from 0, page) of a PDF's bookmarks, read with pypdf; [] for anything else."""
    path = (file or {}).get("path") or ""
    if not str(path).lower().endswith(".pdf"):
        return []
    try:
        from pypdf import PdfReader
        reader = PdfReader(path)
        out: list[tuple[str, int, int]] = []

        def walk(items, depth):
            for item in items:
                if isinstance(item, list):
                    walk(item, depth + 1)
                else:
                    out.append((str(item.title), depth, reader.get_destination_page_number(item) + 1))
        walk(reader.outline, 0)
        return out
    except Exception:
        return []


def _similarity(left: str, right: str) -> float:
    a = {left[i] + left[i + 1] for i in range(len(left) - 1)}
    b = {right[i] + right[i + 1] for i in range(min(len(left), len(right) - 1))}
    return len(a & b) / max(len(a), len(b), 1)


def select_family(lines: list[str], families: list[list[str]]) -> list[str]:
    """The regex family that matches the most lines (first on ties)."""
    hits = [sum(1 for s in (ln.strip() for ln in lines) if s and not not_bullet(s)
                and any(re.match(p, s) for p in group)) for group in families]
    best = max(range(len(hits)), key=lambda i: (hits[i], -i), default=-1)
    return [p for p in families[best] if p] if best >= 0 and hits[best] > 0 else []


def resolve_levels(records: list[dict], families: list[list[str]], outlines: list) -> tuple[list[int], int | None]:
    """Each record's heading level and the most common heading level."""
    if records and outlines and len(outlines) / len(records) > 0.03:
        levels = []
        for r in records:
            match = next((lvl + 1 for title, lvl, _ in outlines if r["doc_type_kwd"] == "text"
                          and _similarity(title, r["text"]) > 0.8), BODY)
            levels.append(match)
        return levels, max(1, max(lvl for _, lvl, _ in outlines))
    family = select_family([r["text"] for r in records], families)
    fallback = len(family) + 1
    levels = []
    for r in records:
        text = r["text"].strip()
        level = BODY
        if r["doc_type_kwd"] == "text":
            level = next((i for i, p in enumerate(family, 1) if re.match(p, text) and not not_bullet(text)), None) \
                or (fallback if re.search(r"(section|title|head)", r["layout"], re.I)
                    and not not_title(r["text"].split("@")[0].strip()) else BODY)
        levels.append(level)
    most = next((lvl for lvl, _ in Counter(levels).most_common() if lvl < BODY), None)
    return levels, most


def target_level(levels: list[int], hierarchy: int | None) -> int | None:
    found = sorted({lvl for lvl in levels if 0 < lvl < BODY})
    if not found:
        return None
    return found[min(max(int(hierarchy or 1), 1), len(found)) - 1]


class _Node:
    def __init__(self, level: int, titles: list[int] | None = None):
        self.level, self.titles, self.body, self.children = level, titles or [], [], []

    def paths(self, out: list, above: list[int], depth: int, with_heading_content: bool) -> None:
        if self.level == 0 and self.body:
            out.append(above + self.body)
        inside = 1 <= self.level <= depth
        if with_heading_content:
            here = above + self.titles if inside else above
            if self.body and inside:
                out.append(here + self.body)
            elif not self.children and inside:
                out.append(here)
        else:
            here = above + self.titles + self.body if inside else above
            if not self.children and inside:
                out.append(here)
        for child in self.children:
            child.paths(out, here, depth, with_heading_content)


def hierarchy_groups(records: list[dict], levels: list[int], p: TitleChunkerParams) -> list[list[dict]]:
    groups: list[list[dict]] = []
    run: list[tuple[dict, int]] = []

    def flush() -> None:
        if not run:
            return
        depth = target_level([lvl for _, lvl in run], p.hierarchy)
        if depth is None:
            groups.append([r for r, _ in run])
        else:
            root, stack = _Node(0), []
            stack.append(root)
            for i, (_, lvl) in enumerate(run):
                if lvl > depth:
                    stack[-1].body.append(i)
                    continue
                while len(stack) > 1 and lvl <= stack[-1].level:
                    stack.pop()
                node = _Node(lvl, [i])
                stack[-1].children.append(node)
                stack.append(node)
            paths: list[list[int]] = []
            root.paths(paths, [], depth, p.include_heading_content)
            groups.extend([run[i][0] for i in path] for path in paths if path)
        run.clear()

    for record, level in zip(records, levels):
        if record["doc_type_kwd"] == "text":
            run.append((record, level))
        else:
            flush()
            groups.append([record])
    flush()
    return groups


def group_groups(records: list[dict], levels: list[int], most: int | None, p: TitleChunkerParams) -> list[list[dict]]:
    target = target_level(levels, p.hierarchy) if p.hierarchy and int(p.hierarchy) > 0 else most
    sections, sid = [], 0
    for i, level in enumerate(levels):
        if target is not None and level <= target and i > 0:
            sid += 1
        sections.append(sid)
    groups: list[list[dict]] = []
    tokens, last = 0, -2
    cap = p.chunk_token_cap or 0
    for record, section in zip(records, sections):
        if record["doc_type_kwd"] != "text":
            groups.append([record])
            tokens, last = 0, -2
            continue
        if not record["text"].strip():
            continue
        n = count_tokens(record["text"])
        if groups and groups[-1][0]["doc_type_kwd"] == "text" and \
                (tokens < MIN_GROUP_TOKENS or ((cap <= 0 or tokens < cap) and section == last)):
            groups[-1].append(record)
            tokens += n
        else:
            groups.append([record])
            tokens = n
        last = section
    return groups


def to_chunks(groups: list[list[dict]], textual: bool, root_as_heading: bool) -> list[dict]:
    if textual:
        chunks = [{"text": "".join(r["text"] + "\n" for r in g)} for g in groups if g]
    else:
        chunks = []
        for g in (g for g in groups if g):
            if g[0]["doc_type_kwd"] == "text":
                positions = sorted({tuple(pos[:5]) for r in g for pos in r[PDF_POSITIONS_KEY]},
                                   key=lambda x: (x[0], x[3], x[1]))
                chunks.append({"text": remove_tag("".join(r["text"] + "\n" for r in g)), "doc_type_kwd": "text",
                               PDF_POSITIONS_KEY: [list(x) for x in positions]})
            else:
                chunks.append({"text": g[0]["text"], "doc_type_kwd": g[0]["doc_type_kwd"], "img_id": g[0]["img_id"],
                               PDF_POSITIONS_KEY: g[0][PDF_POSITIONS_KEY]})
    if root_as_heading and len(chunks) > 1:
        root = chunks[0].get("text", "")
        for c in chunks[1:]:
            c["text"] = root + "\n" + c.get("text", "")
        return chunks[1:]
    return chunks


def _sentences(text: str) -> list[str]:
    raw = re.split(SENTENCE_BOUNDARY, text or "")
    return [s for s in (raw[i] + (raw[i + 1] if i + 1 < len(raw) else "") for i in range(0, len(raw), 2)) if s]


def _tokens(text: str) -> int:
    n = count_tokens(text or "")
    return n if n or not text else len(text)


def _hard_split(text: str, cap: int) -> list[str]:
    out, rest = [], text or ""
    while rest:
        head = truncate(rest, cap)
        if head and not rest.startswith(head):
            head = head[:-1]
        if not head:
            out.append(rest)
            break
        out.append(head)
        rest = rest[len(head):]
    return out


def enforce_cap(chunks: list[dict], cap: int | None) -> list[dict]:
    """Text chunks over `cap` tokens re-split on sentences (then hard); coordinates stay on the first piece."""
    if not cap or cap <= 0:
        return chunks
    out = []
    for chunk in chunks:
        if chunk.get("doc_type_kwd", "text") != "text" or _tokens(chunk.get("text") or "") <= cap:
            out.append(chunk)
            continue
        groups, current = [], ""
        for s in _sentences(chunk.get("text") or ""):
            if current and _tokens(current + s) > cap:
                groups.append(current)
                current = s
            else:
                current = current + s
        if current:
            groups.append(current)
        pieces = [piece for g in groups for piece in ([g] if _tokens(g) <= cap else _hard_split(g, cap))]
        for i, piece in enumerate(pieces or [chunk.get("text") or ""]):
            sub = {**chunk, "text": piece}
            if PDF_POSITIONS_KEY in chunk:
                sub[PDF_POSITIONS_KEY] = chunk[PDF_POSITIONS_KEY] if i == 0 else []
            out.append(sub)
    return out


@register_pipeline("TitleChunker", TitleChunkerParams, outputs=lambda p: {"chunks", "output_format"})
class TitleChunker(PipelineNode):
    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        p: TitleChunkerParams = self.params
        job.progress(0.01, "Start to merge hierarchically." if p.method == "hierarchy" else
                     "Start to group by title levels.")
        records = line_records(upstream)
        levels, most = resolve_levels(records, p.levels, pdf_outlines(upstream.get("file")))
        groups = hierarchy_groups(records, levels, p) if p.method == "hierarchy" else \
            group_groups(records, levels, most, p)
        textual = upstream.get("output_format") in ("markdown", "text", "html")
        chunks = enforce_cap(to_chunks(groups, textual, p.root_chunk_as_heading), p.chunk_token_cap)
        if not textual:
            chunks = [finalize_chunk(deepcopy(c)) for c in chunks]
        return {"output_format": "chunks", "chunks": chunks}
